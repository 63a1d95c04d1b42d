"""Reward profiles: YAML -> frozen dataclasses, with all validation in one place.

The format is described once, in :mod:`inspector.yamlio.profile_spec`, as specs that both
check a profile and write its JSON Schema (``profile_schema()``), so the two agree.
This module holds the dataclasses the environment and the RRM core use, the loader
(:func:`load_profile`, :func:`load_profile_text`), the rules a schema cannot state
(``ok_class`` is a class, per-class keys are classes, a term appears once) and the
warnings about legal but suspicious settings (:func:`check_profile`).

Every problem is a :class:`~inspector.errors.ProfileError` whose text reads
``file:line:col: path: message``, e.g.
``reward_profiles/x.yaml:12:9: terms[2].reward: expected a number, got 'high'``.
"""

from __future__ import annotations

import hashlib
import warnings as _warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inspector.errors import ProfileError
from inspector.terms import OUTCOME, RewardTerm
from inspector.yamlio.located import Checker, YNode, describe, join_path, parse_yaml
from inspector.yamlio.ok_class import check_ok_class, ok_class_of


@dataclass(frozen=True)
class ScanSettings:
    """How the agent sees a part.

    :param glimpse: side of the square glimpse in pixels.
    :param overview: side of the square overview of the whole frame.
    :param zoom_levels: number of zoom levels; level 0 shows the whole frame, the deepest
        shows native pixels.
    :param memory: how many recent glimpses the observation keeps (evidence across glimpses).
    :param move_fraction: a move shifts the viewport by this fraction of its side.
    :param actions: the searcher's action table: ``moves`` (half-viewport moves and
        zooms, the default), ``tiles`` (a jump to each native tile of a
        ``tiles`` x ``tiles`` grid over the frame) or ``moves+tiles`` (both); ``stop``
        always comes last (:func:`inspector.scan.action_names`).
    :param tiles: tiles per side of the jump grid (used with ``tiles`` actions only).
    """

    glimpse: int = 32
    overview: int = 32
    zoom_levels: int = 3
    memory: int = 4
    move_fraction: float = 0.5
    actions: str = "moves"
    tiles: int = 2


@dataclass(frozen=True)
class TermConfig:
    """One entry of ``terms:``.

    :param term: registered term name.
    :param reward: a number, or a per-class mapping for per-class terms.
    :param params: the term's other parameters.
    :param channel: the channel the term declares (``outcome`` or ``process``).
    :param line: 1-based line of the entry in the profile (for messages), 0 when unknown.
    """

    term: str
    reward: float | Mapping[str, float]
    params: Mapping[str, Any] = field(default_factory=dict)
    channel: str = "process"
    line: int = 0


@dataclass(frozen=True)
class RedistributionConfig:
    """How outcome rewards are spread back over the steps that earned them.

    :param method: ``none``, ``exponential``, ``uniform``, ``learned`` or ``shuffled``
        (a control that permutes the exponential weights).
    :param lam: decay rate of ``exponential`` (default 0.15).
    :param window: window T of ``exponential`` in steps.
    :param hidden: hidden size of the ``learned`` return-decomposition model.
    :param lr: learning rate of the ``learned`` model's own optimiser.
    """

    method: str = "none"
    lam: float = 0.15
    window: int = 20
    hidden: int = 32
    lr: float = 1e-3


@dataclass(frozen=True)
class ShapingConfig:
    """Potential-based shaping F = gamma * Phi(s') - Phi(s).

    :param potential: name of a term that declares itself a potential, or None (off).
    :param scale: multiplies Phi.
    :param params: parameters of the potential term.
    """

    potential: str | None = None
    scale: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NormalisationConfig:
    """Reward normalisation after redistribution and shaping.

    :param method: ``none``, ``running`` (running std of discounted returns, like
        VecNormalize) or ``minmax`` (running min-max to [-1, 1] with ``epsilon``).
    :param clip: clip normalised rewards to [-clip, clip]; None for no clipping.
    :param epsilon: numerical floor.
    """

    method: str = "none"
    clip: float | None = None
    epsilon: float = 1e-8


@dataclass(frozen=True)
class RRMConfig:
    """The reward redistribution model's settings.

    :param outcome_weight: weight of the outcome channel.
    :param process_weight: weight of the process channel.
    """

    outcome_weight: float = 1.0
    process_weight: float = 1.0
    redistribution: RedistributionConfig = field(default_factory=RedistributionConfig)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    normalisation: NormalisationConfig = field(default_factory=NormalisationConfig)

    @property
    def is_identity(self) -> bool:
        """True when the RRM leaves the environment's rewards untouched."""
        return (
            self.outcome_weight == 1.0
            and self.process_weight == 1.0
            and self.redistribution.method == "none"
            and self.shaping.potential is None
            and self.normalisation.method == "none"
        )


@dataclass(frozen=True)
class Profile:
    """A validated reward profile.

    :param name: the profile's name.
    :param classes: ``ok_class`` first, then the defect classes.
    :param ok_class: the class meaning "no defect", or None when no class is defect-free
        (``ok_class: none``: classification-only footage, every part has a defect; its
        figures have no false-alarm rate and no ok-vs-defect operating point).
    :param step_budget: steps before the episode is truncated.
    :param scan: observation geometry.
    :param terms: the reward terms in profile order.
    :param rrm: reward redistribution settings.
    :param description: free text from the profile.
    :param path: the file it came from ("" for in-memory profiles).
    :param sha256: sha256 of the file's bytes.
    :param provenance: where fitted values came from (``profile fit``); empty otherwise.
    :param warnings: what :func:`check_profile` reports for it.
    """

    name: str
    classes: tuple[str, ...]
    ok_class: str | None
    step_budget: int
    scan: ScanSettings
    terms: tuple[TermConfig, ...]
    rrm: RRMConfig = field(default_factory=RRMConfig)
    description: str = ""
    path: str = ""
    sha256: str = ""
    provenance: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: Legal but suspicious settings found when loading (also issued as ProfileWarning).
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def defect_classes(self) -> tuple[str, ...]:
        """The classes other than ``ok_class``."""
        return tuple(c for c in self.classes if c != self.ok_class)

    @property
    def classification_only(self) -> bool:
        """Whether no class is defect-free (``ok_class: none``)."""
        return self.ok_class is None

    def term_weights(self) -> dict[str, float]:
        """Each term's channel weight (``rrm.outcome_weight`` or ``rrm.process_weight``),
        by term name, in profile order: what a term's value counts for in the reward."""
        rrm = self.rrm
        return {
            t.term: rrm.outcome_weight if t.channel == OUTCOME else rrm.process_weight
            for t in self.terms
        }

    def build_terms(self, plugins: Any = None) -> list[RewardTerm]:
        """Instantiate the terms (once per environment), in profile order."""
        from inspector.plugins import get_plugins

        reg = (plugins or get_plugins()).reward_terms
        return [reg.get(t.term)(reward=t.reward, **dict(t.params)) for t in self.terms]

    def build_potential(self, plugins: Any = None) -> RewardTerm | None:
        """Instantiate the shaping potential term, or None when shaping is off."""
        if self.rrm.shaping.potential is None:
            return None
        from inspector.plugins import get_plugins

        reg = (plugins or get_plugins()).reward_terms
        return reg.get(self.rrm.shaping.potential)(
            reward=self.rrm.shaping.scale, **dict(self.rrm.shaping.params)
        )

    def outcome_matrix(self, terms: list[RewardTerm] | None = None) -> np.ndarray:
        """R[c, y]: the outcome reward for declaring class c on a part of class y."""
        terms = terms if terms is not None else self.build_terms()
        n = len(self.classes)
        m = np.zeros((n, n), dtype=np.float64)
        for term in terms:
            if term.channel != OUTCOME:
                continue
            for i, c in enumerate(self.classes):
                for j, y in enumerate(self.classes):
                    m[i, j] += term.verdict_value(c, y, self.classes, self.ok_class)
        return m


class ProfileWarning(UserWarning):
    """A legal but suspicious profile setting (all rewards zero, step cost too large, ...)."""


def load_profile(path: str, *, plugins: Any = None, warn: bool = True) -> Profile:
    """Load and validate a YAML reward profile.

    :param path: the profile file.
    :param plugins: a :class:`inspector.plugins.Plugins` (the process-wide one by default);
        its reward terms are the names a profile may use.
    :param warn: issue each suspicious setting as a :class:`ProfileWarning`.
    :raises inspector.errors.ProfileError: with file, line, column and document path.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_READ + 1)
    except OSError as exc:
        raise ProfileError(f"cannot read profile: {exc.strerror or exc}", file=str(path)) from None
    return _load(data, str(path), plugins=plugins, warn=warn)


def load_profile_text(
    text: str | bytes, file: str = "<string>", *, plugins: Any = None, warn: bool = True
) -> Profile:
    """Validate a profile given as text (tests, editors, ``profile check -``).

    :param text: the YAML document.
    :param file: the name used in messages (``Profile.path`` is "" for in-memory text).
    :param plugins: see :func:`load_profile`.
    :param warn: see :func:`load_profile`.
    :raises inspector.errors.ProfileError: with file, line, column and document path.
    """
    profile = _load(text, file, plugins=plugins, warn=warn)
    return _replace(profile, path="")


def check_profile(path: str, *, plugins: Any = None) -> list[str]:
    """Validate ``path`` and return its warnings (legal but suspicious settings).

    :raises inspector.errors.ProfileError: the profile is invalid.
    """
    return list(load_profile(path, plugins=plugins, warn=False).warnings)


def profile_schema(plugins: Any = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of reward profiles, with the registered terms.

    :param plugins: see :func:`load_profile`.
    """
    from inspector.yamlio.profile_spec import schema_document

    return schema_document(_spec_for(_registry(plugins)))


# -- internals -------------------------------------------------------------------------------

_MAX_READ = 1_000_000


def _replace(profile: Profile, **changes: Any) -> Profile:
    from dataclasses import replace

    return replace(profile, **changes)


def _registry(plugins: Any) -> Any:
    from inspector.plugins import get_plugins

    return (plugins or get_plugins()).reward_terms


_SPECS: dict[int, tuple[Any, Any]] = {}


def _spec_for(registry: Any) -> Any:
    """The format spec for ``registry``, built once per registry (a few ms each)."""
    import weakref

    from inspector.yamlio.profile_spec import profile_spec

    hit = _SPECS.get(id(registry))
    if hit is not None and hit[0]() is registry:
        return hit[1]
    spec = profile_spec(registry)
    if len(_SPECS) > 8:  # registries are rebuilt only by tests and reset_plugins()
        _SPECS.clear()
    _SPECS[id(registry)] = (weakref.ref(registry), spec)
    return spec


def _load(data: str | bytes, file: str, *, plugins: Any, warn: bool) -> Profile:
    from inspector.yamlio.profile_spec import term_info

    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    sha = hashlib.sha256(raw).hexdigest()
    root = parse_yaml(data, file)
    ck = Checker(file)
    if root is None:
        raise ProfileError(
            "empty profile: expected a mapping with name, classes, step_budget and terms",
            file=file,
            line=1,
            column=1,
        )
    if root.kind != "map":
        raise ck.fail(root, "", f"expected a mapping at the top level, got {describe(root)}")
    registry = _registry(plugins)
    doc = _spec_for(registry).check(root, "", ck)
    _check_semantics(root, doc, ck)
    infos = {t["term"]: term_info(t["term"], registry.get(t["term"])) for t in doc["terms"]}
    profile = _build(root, doc, file, sha, infos)
    found = tuple(_suspicious(profile, infos))
    profile = _replace(profile, warnings=found)
    if warn:
        for w in found:
            _warnings.warn(f"{file}: {w}", ProfileWarning, stacklevel=3)
    return profile


def _check_semantics(root: YNode, doc: dict[str, Any], ck: Checker) -> None:
    """The rules JSON Schema cannot state: they relate one value to another."""
    classes: list[str] = doc["classes"]
    check_ok_class(root, doc, ck)
    allowed = [*classes, "default"]
    seen: dict[str, int] = {}
    term_nodes: list[YNode] = root.value["terms"].value
    for i, (entry, node) in enumerate(zip(doc["terms"], term_nodes)):
        name = entry["term"]
        path = f"terms[{i}]"
        if name in seen:
            raise ck.fail(
                node.value["term"],
                f"{path}.term",
                f"term {name!r} appears twice (first as terms[{seen[name]}]); combine them",
            )
        seen[name] = i
        reward = node.value["reward"]
        if reward.kind == "map":
            for key, key_node in reward.keys.items():
                if key not in allowed:
                    import difflib

                    close = difflib.get_close_matches(str(key), allowed, n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ck.fail(
                        key_node,
                        join_path(f"{path}.reward", str(key)),
                        f"{key!r} is not a class{hint}; classes: {', '.join(classes)} "
                        "(or 'default')",
                    )


def _build(root: YNode, doc: dict[str, Any], file: str, sha: str, infos: dict[str, Any]) -> Profile:
    classes = tuple(doc["classes"])
    terms = []
    for entry, node in zip(doc["terms"], root.value["terms"].value):
        reward = entry["reward"]
        info = infos[entry["term"]]
        terms.append(
            TermConfig(
                term=entry["term"],
                reward=dict(reward) if isinstance(reward, Mapping) else float(reward),
                params=dict(entry.get("params", {})),
                channel=info.channel,
                line=node.line,
            )
        )
    rrm = doc.get("rrm", {})
    channels = rrm.get("channels", {})
    red = rrm.get("redistribution", {})
    shaping = rrm.get("shaping", {})
    norm = rrm.get("normalisation", {})
    defaults = RedistributionConfig()
    return Profile(
        name=doc["name"],
        classes=classes,
        ok_class=ok_class_of(doc),
        step_budget=int(doc["step_budget"]),
        scan=ScanSettings(**doc.get("scan", {})),
        terms=tuple(terms),
        rrm=RRMConfig(
            outcome_weight=float(channels.get("outcome", 1.0)),
            process_weight=float(channels.get("process", 1.0)),
            redistribution=RedistributionConfig(
                method=red.get("method", "none"),
                lam=float(red.get("lambda", defaults.lam)),
                window=int(red.get("window", defaults.window)),
                hidden=int(red.get("hidden", defaults.hidden)),
                lr=float(red.get("lr", defaults.lr)),
            ),
            shaping=ShapingConfig(
                potential=shaping.get("potential"),
                scale=float(shaping.get("scale", 1.0)),
                params=dict(shaping.get("params", {})) if shaping.get("potential") else {},
            ),
            normalisation=NormalisationConfig(
                method=norm.get("method", "none"),
                clip=norm.get("clip"),
                epsilon=float(norm.get("epsilon", 1e-8)),
            ),
        ),
        description=doc.get("description", ""),
        provenance=dict(doc.get("provenance", {})),
        path=file,
        sha256=sha,
    )


def _values(reward: float | Mapping[str, float]) -> list[float]:
    return [float(v) for v in reward.values()] if isinstance(reward, Mapping) else [float(reward)]


def _suspicious(profile: Profile, infos: dict[str, Any]) -> list[str]:
    """Legal settings that are probably mistakes; each is one line."""
    out: list[str] = []
    all_values = [v for t in profile.terms for v in _values(t.reward)]
    if all(v == 0.0 for v in all_values):
        out.append("all rewards are zero: the agent has nothing to learn")
    positive = max([v for v in all_values if v > 0], default=0.0)
    cost = sum(-float(t.reward) for t in profile.terms if t.term == "step_cost")
    if cost > 0 and cost * profile.step_budget > positive:
        out.append(
            f"step_cost {-cost:g} over the step budget {profile.step_budget} costs "
            f"{cost * profile.step_budget:g}, more than the largest reward {positive:g}: "
            "the agent learns to stop at once"
        )
    for i, t in enumerate(profile.terms):
        sign = infos[t.term].reward_sign
        wrong = [v for v in _values(t.reward) if sign and v * sign < 0]
        if wrong:
            kind = "a penalty" if sign < 0 else "a reward"
            out.append(
                f"terms[{i}] {t.term} is meant as {kind} but has value {wrong[0]:g} (line {t.line})"
            )
    if profile.ok_class is None:
        for i, t in enumerate(profile.terms):
            if t.term in ("false_alarm", "missed_defect"):
                out.append(
                    f"terms[{i}] {t.term} never pays with 'ok_class: none' (no part is ok); "
                    f"use wrong_class (line {t.line})"
                )
    if not any(t.channel == OUTCOME for t in profile.terms):
        out.append("no outcome term: the verdict earns nothing")
    elif profile.rrm.outcome_weight == 0.0:
        out.append("rrm.channels.outcome is 0: the verdict earns nothing")
    return out
