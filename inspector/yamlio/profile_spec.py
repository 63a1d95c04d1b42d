"""The reward-profile format, described once as specs (see :mod:`inspector.yamlio.spec`).

The same description validates profiles (:func:`inspector.profile.load_profile`) and
writes the JSON Schema (:func:`inspector.profile.profile_schema`). Term entries and
shaping potentials are built from the plugin registry: each term's parameters are
the keyword arguments of its ``__init__`` (type hints, defaults, ``:param:`` docs),
bounded by an optional ``param_ranges`` class attribute.

Optional class attributes a term may set besides the :class:`RewardTerm` ones:

* ``param_ranges: dict[str, tuple[float, float]]``: inclusive bounds of numeric params;
* ``reward_sign: int``: +1 (a reward) or -1 (a penalty); a value of the other sign warns.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from inspector.terms import CHANNELS, PROCESS
from inspector.yamlio.spec import (
    Anything,
    Boolean,
    Either,
    Key,
    ListOf,
    MapOf,
    Null,
    Nullable,
    Number,
    Record,
    Spec,
    String,
    Tagged,
)

#: The searcher's action tables a profile may choose (``scan.actions``); see
#: :func:`inspector.scan.action_names`.
ACTION_SETS = ("moves", "tiles", "moves+tiles")

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:inspector:reward-profile:1"

#: Profile names end up in file names and model metadata.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
#: Class names end up in ONNX metadata, MQTT topics and CSV columns.
CLASS_PATTERN = r"[A-Za-z_][A-Za-z0-9_-]{0,39}"
#: Rewards beyond this are a typo (or would swamp every other term).
MAX_REWARD = 1000.0
#: Parameters without declared bounds.
MAX_PARAM = 1e6
MAX_STEPS = 1000
MAX_TERMS = 64


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a term.

    :param name: the keyword.
    :param spec: how its value is checked.
    :param required: no default in the signature.
    :param default: the default (None when required).
    :param doc: its ``:param:`` line.
    """

    name: str
    spec: Spec
    required: bool
    default: Any
    doc: str


@dataclass(frozen=True)
class TermInfo:
    """What the validator knows about a registered term.

    :param name: the registered name.
    :param channel: ``outcome`` or ``process``.
    :param per_class: reward may be a class -> value mapping.
    :param is_potential: may serve as ``rrm.shaping.potential``.
    :param summary: one line.
    :param params: name -> :class:`ParamInfo` (``reward`` excluded); None when the term
        takes ``**kwargs`` (any parameter goes).
    :param reward_sign: +1, -1 or 0 (either).
    """

    name: str
    channel: str
    per_class: bool
    is_potential: bool
    summary: str
    params: dict[str, ParamInfo] | None
    reward_sign: int


_PARAM_DOC = re.compile(r":param\s+(\w+):\s*(.*?)(?=\n\s*:|\Z)", re.S)


def _param_docs(factory: Any) -> dict[str, str]:
    text = "\n".join(
        d for d in (inspect.getdoc(factory), getattr(factory.__init__, "__doc__", None)) if d
    )
    return {m.group(1): " ".join(m.group(2).split()) for m in _PARAM_DOC.finditer(text)}


def _hint_spec(hint: Any, bounds: tuple[float, float] | None, doc: str) -> Spec:
    """The spec of a parameter from its type hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and len(others) < len(args):
            return Nullable(_hint_spec(others[0], bounds, ""), doc=doc)
        return Anything(doc=doc)
    if origin is typing.Literal and args and all(isinstance(a, str) for a in args):
        return String(enum=tuple(args), doc=doc)
    if hint is bool:
        return Boolean(doc=doc)
    if hint in (int, float):
        lo, hi = bounds if bounds else (-MAX_PARAM, MAX_PARAM)
        return Number(lo=float(lo), hi=float(hi), integer=hint is int, doc=doc)
    if hint is str:
        return String(min_len=0, doc=doc)
    return Anything(doc=doc)


def term_info(name: str, factory: Any) -> TermInfo:
    """Introspect a registered term factory (a RewardTerm subclass or a callable).

    :param name: the name it is registered under.
    :param factory: what the plugin registered.
    """
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable forward references: check values loosely
        hints = {}
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable: no signature to check against
        sig = inspect.Signature([inspect.Parameter("kw", inspect.Parameter.VAR_KEYWORD)])
    ranges = getattr(factory, "param_ranges", None) or {}
    docs = _param_docs(factory)
    params: dict[str, ParamInfo] | None = {}
    for pname, p in sig.parameters.items():
        if pname in ("self", "reward"):
            continue
        if p.kind is p.VAR_KEYWORD:
            params = None
            break
        if p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        required = p.default is inspect.Parameter.empty
        params[pname] = ParamInfo(
            name=pname,
            spec=_hint_spec(hints.get(pname, Any), ranges.get(pname), docs.get(pname, "")),
            required=required,
            default=None if required else p.default,
            doc=docs.get(pname, ""),
        )
    channel = getattr(factory, "channel", PROCESS)
    return TermInfo(
        name=name,
        channel=channel if channel in CHANNELS else PROCESS,
        per_class=bool(getattr(factory, "per_class", False)),
        is_potential=bool(getattr(factory, "is_potential", False)),
        summary=str(getattr(factory, "summary", "") or ""),
        params=params,
        reward_sign=int(getattr(factory, "reward_sign", 0) or 0),
    )


def _params_spec(info: TermInfo) -> Spec:
    if info.params is None:
        return MapOf(key=String(pattern=r"[A-Za-z_]\w*"), value=Anything())
    return Record(
        keys={n: Key(p.spec, required=p.required, doc=p.doc) for n, p in info.params.items()},
        unknown=f"term {info.name!r} has no parameter",
        doc=f"parameters of {info.name}",
    )


class Reward(Spec):
    """A term's ``reward``: a number, or for per-class terms also class -> number."""

    def __init__(self, info: TermInfo) -> None:
        self.info = info
        self.number = Number(lo=-MAX_REWARD, hi=MAX_REWARD)
        self.per_class = MapOf(key=String(pattern=CLASS_PATTERN), value=self.number, max_items=65)
        self.inner: Spec = Either((self.number, self.per_class)) if info.per_class else self.number
        self.what = self.inner.what
        self.doc = (
            "a number, or class -> number (keys: the profile's classes or 'default')"
            if info.per_class
            else "a number"
        )

    def check(self, node: Any, path: str, ck: Any) -> Any:
        if node.kind == "map" and not self.info.per_class:
            raise ck.fail(
                node,
                path,
                f"term {self.info.name!r} is not per-class: expected a number, got a mapping",
            )
        return self.inner.check(node, path, ck)

    def schema(self) -> dict[str, Any]:
        return {**self.inner.schema(), "description": self.doc}


class Channel(String):
    """``terms[i].channel``: optional, and when given it must be the term's own channel."""

    def __init__(self, info: TermInfo) -> None:
        super().__init__(enum=(info.channel,))
        object.__setattr__(self, "term", info.name)

    def check(self, node: Any, path: str, ck: Any) -> Any:
        if node.kind == "scalar" and isinstance(node.value, str) and node.value in CHANNELS:
            if node.value != self.enum[0]:
                raise ck.fail(
                    node,
                    path,
                    f"term {self.term!r} is an {self.enum[0]} term, not {node.value}"
                    if self.enum[0] == "outcome"
                    else f"term {self.term!r} is a {self.enum[0]} term, not {node.value}",
                )
        return super().check(node, path, ck)


def term_entry_spec(registry: Any) -> Tagged:
    """``terms[i]``: a mapping whose ``term`` picks the term's own keys and parameters."""
    variants = {}
    for name in registry.names():
        info = term_info(name, registry.get(name))
        variants[name] = Record(
            keys={
                "term": Key(String(enum=(name,)), required=True, doc=info.summary),
                "reward": Key(Reward(info), required=True),
                "params": Key(_params_spec(info)),
                "channel": Key(
                    Channel(info),
                    doc=f"optional; must be the term's own channel ({info.channel})",
                ),
            },
            doc=f"{name} ({info.channel}): {info.summary}",
        )
    return Tagged(tag="term", variants=variants, noun="term", doc="one reward term")


def _shaping_spec(registry: Any) -> Tagged:
    variants = {}
    for name in registry.names():
        info = term_info(name, registry.get(name))
        if not info.is_potential:
            continue
        variants[name] = Record(
            keys={
                "potential": Key(String(enum=(name,)), required=True, doc=info.summary),
                "scale": Key(Number(lo=-MAX_REWARD, hi=MAX_REWARD), doc="multiplies Phi"),
                "params": Key(_params_spec(info)),
            }
        )
    off = Record(
        keys={
            "potential": Key(Null(), required=True, doc="null: no shaping"),
            "scale": Key(Number(lo=-MAX_REWARD, hi=MAX_REWARD)),
            "params": Key(MapOf(key=String(), value=Anything())),
        }
    )

    def explain(value: str) -> str | None:
        if value in registry.names():
            return f"term {value!r} is not a potential (it has no potential())"
        return None

    return Tagged(
        tag="potential",
        variants=variants,
        noun="potential",
        null_variant=off,
        explain_unknown=explain,
        doc="potential-based shaping F = gamma * Phi(s') - Phi(s)",
    )


def _method(name: str, noun: str, **keys: Key) -> Record:
    return Record(
        keys={"method": Key(String(enum=(name,)), required=True), **keys},
        unknown=f"{noun} method {name!r} has no setting",
    )


def _rrm_spec(registry: Any) -> Record:
    lam = Key(Number(lo=0.0, hi=100.0), doc="decay rate of the weights exp(-lambda*|t-k|)")
    window = Key(Number(lo=1, hi=MAX_STEPS, integer=True), doc="window T in steps")
    redistribution = Tagged(
        tag="method",
        noun="redistribution method",
        variants={
            "none": _method("none", "redistribution"),
            "exponential": _method(
                "exponential", "redistribution", **{"lambda": lam, "window": window}
            ),
            "shuffled": _method("shuffled", "redistribution", **{"lambda": lam, "window": window}),
            "uniform": _method("uniform", "redistribution"),
            "learned": _method(
                "learned",
                "redistribution",
                hidden=Key(Number(lo=1, hi=1024, integer=True), doc="hidden size"),
                lr=Key(Number(lo=0.0, hi=1.0, lo_exclusive=True), doc="learning rate"),
            ),
        },
        doc="how outcome rewards are spread back over the steps that earned them",
    )
    clip = Key(Nullable(Number(lo=0.0, hi=MAX_PARAM, lo_exclusive=True)), doc="null: no clip")
    eps = Key(Number(lo=0.0, hi=1.0, lo_exclusive=True), doc="numerical floor")
    normalisation = Tagged(
        tag="method",
        noun="normalisation method",
        variants={
            "none": _method("none", "normalisation"),
            "running": _method("running", "normalisation", clip=clip, epsilon=eps),
            "minmax": _method("minmax", "normalisation", clip=clip, epsilon=eps),
        },
        doc="reward normalisation after redistribution and shaping",
    )
    weight = Number(lo=0.0, hi=100.0)
    return Record(
        keys={
            "channels": Key(
                Record(keys={"outcome": Key(weight), "process": Key(weight)}),
                doc="channel weights",
            ),
            "redistribution": Key(redistribution),
            "shaping": Key(_shaping_spec(registry)),
            "normalisation": Key(normalisation),
        },
        doc="reward redistribution model",
    )


def provenance_spec() -> Record:
    """``provenance``: where fitted values came from (written by ``profile fit``)."""
    sha = String(pattern=r"[0-9a-f]{64}", doc="hex sha256")
    count = Number(lo=0, hi=1e9, integer=True)
    share = Number(lo=0.0, hi=1.0)
    loglik = Number(lo=-1e12, hi=0.0)
    return Record(
        keys={
            "parent_sha256": Key(
                sha, required=True, doc="sha256 of the profile it was fitted from"
            ),
            "method": Key(String(enum=("bradley-terry",)), required=True),
            "preferences": Key(count, doc="preferences fitted"),
            "preferences_sha256": Key(sha, doc="sha256 of the preferences file"),
            "ties": Key(count),
            "log_likelihood": Key(loglik, doc="of the preferences under these values"),
            "null_log_likelihood": Key(loglik, doc="of the preferences at chance"),
            "agreement": Key(share, doc="share of the choices the values agree with"),
            "heldout_agreement": Key(Nullable(share), doc="the same on held-out preferences"),
            "heldout_pairs": Key(count),
            "holdout": Key(share, doc="share of the preferences held out"),
            "seed": Key(Number(lo=-(2**63), hi=2**63, integer=True), doc="seed of the split"),
            "penalty": Key(Number(lo=0.0, hi=1e6), doc="weight of the pull to the parent"),
            "lapse": Key(share, doc="share of choices assumed made at random"),
            "pinned": Key(ListOf(String(), max_items=MAX_TERMS), doc="terms not fitted"),
            "multipliers": Key(
                MapOf(key=String(), value=Number(lo=0.0, hi=1e6), max_items=MAX_TERMS),
                doc="term -> factor on the parent's value",
            ),
            "fitted_at": Key(String(), doc="UTC time of the fit"),
        },
        doc="where fitted values came from (written by profile fit)",
    )


def profile_spec(registry: Any) -> Record:
    """The whole profile format, with the terms ``registry`` knows.

    :param registry: a :class:`inspector.plugins.Registry` of reward terms.
    """
    class_name = String(pattern=CLASS_PATTERN, reserved=("default",))
    scan = Record(
        keys={
            "glimpse": Key(Number(lo=8, hi=512, integer=True), doc="glimpse side in pixels"),
            "overview": Key(Number(lo=8, hi=512, integer=True), doc="overview side in pixels"),
            "zoom_levels": Key(Number(lo=1, hi=8, integer=True), doc="0 = whole frame"),
            "memory": Key(Number(lo=1, hi=64, integer=True), doc="recent glimpses kept"),
            "move_fraction": Key(
                Number(lo=0.0, hi=1.0, lo_exclusive=True), doc="move step / viewport side"
            ),
            "actions": Key(
                String(enum=ACTION_SETS),
                doc="the searcher's actions: half-viewport moves and zooms (default), a jump "
                "to each native tile, or both; stop comes last",
            ),
            "tiles": Key(
                Number(lo=1, hi=16, integer=True),
                doc="tiles per side of the jump grid (tiles actions only; default 2)",
            ),
        },
        doc="how the agent sees a part",
    )
    return Record(
        keys={
            "name": Key(String(pattern=NAME_PATTERN), required=True),
            "description": Key(String(min_len=0, max_len=10_000)),
            "classes": Key(
                ListOf(class_name, min_items=2, max_items=64, unique=True),
                required=True,
                doc="the ok class first, then the defect classes (see ok_class)",
            ),
            "ok_class": Key(
                class_name,
                doc="the class meaning 'no defect', listed first (default: a class named "
                "'ok'); 'none' when every part has a defect (classification only)",
            ),
            "step_budget": Key(
                Number(lo=1, hi=MAX_STEPS, integer=True),
                required=True,
                doc="steps before the episode is truncated",
            ),
            "scan": Key(scan),
            "terms": Key(
                ListOf(term_entry_spec(registry), min_items=1, max_items=MAX_TERMS),
                required=True,
                doc="reward terms, applied in this order",
            ),
            "rrm": Key(_rrm_spec(registry)),
            "provenance": Key(provenance_spec()),
        },
        doc="inspector reward profile",
    )


def schema_document(spec: Record) -> dict[str, Any]:
    """Wrap the spec's schema as a standalone JSON Schema document."""
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        "title": "inspector reward profile",
        **spec.schema(),
    }
