"""The one interface the station, ``eval`` and the benchmarks run policies through.

Backends (ONNX Runtime, TensorRT, torch) implement :meth:`Policy.forward` on a
batch; :meth:`Policy.act` turns one observation into an action and the class
probabilities. The verdict on ``stop`` is chosen by the profile's outcome values
(expected reward), so an engineer's false-alarm and miss costs set the threshold.

ONNX graph contract (also used to build TensorRT engines):

* inputs ``glimpse`` float32 [N, M, G, G] (M = scan memory, raw 0..255 values),
  ``overview`` float32 [N, 1, O, O], ``state`` float32 [N, S];
* outputs ``action_logits`` [N, A], ``class_probs`` [N, C], ``value`` [N, 1];
* metadata_props (JSON strings): ``inspector.classes``, ``inspector.actions``,
  ``inspector.scan``, ``inspector.state_size``, ``inspector.outcome_matrix``,
  ``inspector.profile_name``, ``inspector.profile_sha256``, ``inspector.model_sha256``,
  ``inspector.exporter_version``, ``inspector.step_budget`` and, where the model was
  calibrated (:mod:`inspector.policy.operating_point`), ``inspector.ok_bias``, and where
  calibration chose a search depth below native, ``inspector.max_zoom``; an ensemble
  (:mod:`inspector.policy.ensemble`) also ``inspector.ensemble``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inspector.errors import ModelError
from inspector.policy.operating_point import shift_ok

INPUT_NAMES = ("glimpse", "overview", "state")
OUTPUT_NAMES = ("action_logits", "class_probs", "value")
META_PREFIX = "inspector."


@dataclass(frozen=True)
class ModelMeta:
    """What a model file says about itself.

    :param classes: verdict classes, ok class first.
    :param actions: action names in index order.
    :param scan: the scan settings as a dict (glimpse, overview, zoom_levels, memory,
        move_fraction; ``actions`` and ``tiles`` where the action table is not the
        default moves, :func:`inspector.scan.scan_metadata`).
    :param state_size: length of the state vector.
    :param outcome_matrix: R[c, y] outcome rewards (declare c on a part of class y).
    :param profile_name: the reward profile's name.
    :param profile_sha256: sha256 of the profile file.
    :param model_sha256: sha256 of the source model file.
    :param step_budget: the profile's step budget.
    :param exporter_version: inspector version that exported it.
    :param ok_bias: the calibrated operating point: log-odds added to the ok class (the
        first) before the verdict (0: the probabilities as trained).
    :param ensemble: for a verdict ensemble, its members' model sha256, lead first
        (empty: one model).
    :param classification_only: no class is defect-free (the profile's ``ok_class:
        none``): :attr:`ok_class` is None, every verdict is a defect, no operating point.
    :param max_zoom: the calibrated search depth: the deepest zoom level the search may
        look at (the agent stops, and declares on what it has seen, rather than take a
        deeper glimpse); None: every level, as trained
        (:func:`inspector.policy.agent.run_episode`).
    """

    classes: tuple[str, ...]
    actions: tuple[str, ...]
    scan: Mapping[str, Any]
    state_size: int
    outcome_matrix: np.ndarray
    profile_name: str = ""
    profile_sha256: str = ""
    model_sha256: str = ""
    step_budget: int = 0
    exporter_version: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
    ok_bias: float = 0.0
    ensemble: tuple[str, ...] = ()
    classification_only: bool = False
    max_zoom: int | None = None

    @property
    def ok_class(self) -> str | None:
        """The class meaning "no defect" (the first), or None for classification only."""
        return None if self.classification_only else self.classes[0]

    def to_props(self) -> dict[str, str]:
        """metadata_props for an ONNX model (all values JSON)."""
        d = {
            "classes": list(self.classes),
            "actions": list(self.actions),
            "scan": dict(self.scan),
            "state_size": int(self.state_size),
            "outcome_matrix": np.asarray(self.outcome_matrix, dtype=float).tolist(),
            "profile_name": self.profile_name,
            "profile_sha256": self.profile_sha256,
            "model_sha256": self.model_sha256,
            "step_budget": int(self.step_budget),
            "exporter_version": self.exporter_version,
        }
        if self.ok_bias:
            d["ok_bias"] = float(self.ok_bias)
        if self.ensemble:
            d["ensemble"] = list(self.ensemble)
        if self.classification_only:
            d["classification_only"] = True
        if self.max_zoom is not None:
            d["max_zoom"] = int(self.max_zoom)
        return {META_PREFIX + k: json.dumps(v) for k, v in d.items()}

    @classmethod
    def from_props(cls, props: Mapping[str, str], source: str = "model") -> ModelMeta:
        """Parse metadata_props written by :meth:`to_props`, checking types and sizes.

        :raises ModelError: a key is missing, not valid JSON, or of the wrong type or size
            (classes that are not a list of distinct names, an outcome matrix that is not
            one row and column per class, ...).
        """
        try:
            get = {
                k[len(META_PREFIX) :]: json.loads(v)
                for k, v in props.items()
                if k.startswith(META_PREFIX)
            }
            missing = [
                k
                for k in ("classes", "actions", "scan", "state_size", "outcome_matrix")
                if k not in get
            ]
            if missing:
                raise KeyError(missing[0])
        except (KeyError, ValueError, TypeError, RecursionError) as exc:
            raise ModelError(
                f"{source}: not an inspector model (metadata missing or broken: {exc})"
            ) from None
        return cls._checked(get, source)

    @classmethod
    def _checked(cls, get: Mapping[str, Any], source: str) -> ModelMeta:
        """The metadata, its types and sizes checked (one ModelError line when not)."""

        def bad(what: str) -> ModelError:
            return ModelError(f"{source}: broken model metadata: {what}")

        def names(key: str) -> tuple[str, ...]:
            v = get[key]
            if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
                raise bad(f"{key} must be a non-empty list of names")
            if len(set(v)) != len(v):
                raise bad(f"{key} names one twice")
            return tuple(v)

        def count(v: Any, what: str, lo: int = 1) -> int:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= 1_000_000:
                raise bad(f"{what} must be a whole number >= {lo}, got {v!r:.40}")
            return v

        try:
            classes, actions = names("classes"), names("actions")
            scan = get["scan"]
            if not isinstance(scan, dict):
                raise bad("scan must be an object")
            matrix = np.asarray(get["outcome_matrix"], dtype=np.float64)
        except KeyError as exc:
            raise bad(f"{exc} missing") from None
        except (ValueError, TypeError) as exc:
            raise bad(f"outcome_matrix is not a matrix of numbers ({exc})") from None
        if matrix.shape != (len(classes), len(classes)) or not np.isfinite(matrix).all():
            raise bad(
                f"outcome_matrix must be {len(classes)}x{len(classes)} finite numbers "
                f"(one row and column per class), got shape {list(matrix.shape)}"
            )
        ok_bias = get.get("ok_bias", 0.0)
        if isinstance(ok_bias, bool) or not isinstance(ok_bias, (int, float)):
            raise bad(f"ok_bias must be a number, got {ok_bias!r:.40}")
        if not np.isfinite(ok_bias):
            raise bad("ok_bias must be finite")
        for key in ("profile_name", "profile_sha256", "model_sha256", "exporter_version"):
            if not isinstance(get.get(key, ""), str):
                raise bad(f"{key} must be a string")
        ensemble = get.get("ensemble", [])
        if not isinstance(ensemble, list):
            raise bad("ensemble must be a list")
        only = get.get("classification_only", False)
        if not isinstance(only, bool):
            raise bad("classification_only must be true or false")
        max_zoom = get.get("max_zoom")
        if max_zoom is not None:
            levels = scan.get("zoom_levels")
            top = levels - 1 if isinstance(levels, int) and not isinstance(levels, bool) else 0
            if isinstance(max_zoom, bool) or not isinstance(max_zoom, int):
                raise bad(f"max_zoom must be a whole number, got {max_zoom!r:.40}")
            if not 0 <= max_zoom <= top:
                raise bad(f"max_zoom must be 0 .. {top} (the scan's zoom levels), got {max_zoom}")
        return cls(
            classes=classes,
            actions=actions,
            scan=dict(scan),
            state_size=count(get.get("state_size"), "state_size"),
            outcome_matrix=matrix,
            profile_name=get.get("profile_name", ""),
            profile_sha256=get.get("profile_sha256", ""),
            model_sha256=get.get("model_sha256", ""),
            step_budget=count(get.get("step_budget", 0), "step_budget", lo=0),
            exporter_version=get.get("exporter_version", ""),
            ok_bias=float(ok_bias),
            ensemble=tuple(str(x) for x in ensemble),
            classification_only=only,
            max_zoom=max_zoom,
        )

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-sample shapes of the graph's inputs and outputs this metadata implies."""
        s = self.scan
        g, o, m = int(s["glimpse"]), int(s["overview"]), int(s["memory"])
        return {
            "glimpse": (m, g, g),
            "overview": (1, o, o),
            "state": (int(self.state_size),),
            "action_logits": (len(self.actions),),
            "class_probs": (len(self.classes),),
            "value": (1,),
        }


def first_difference(a: Any, b: Any, fields: Sequence[str]) -> tuple[str, Any, Any] | None:
    """The first of ``fields`` whose value differs between two models' metadata.

    :returns: ``(field, a's value, b's value)``, or None when they all agree (a field
        neither has counts as equal).
    """
    for name in fields:
        va, vb = getattr(a, name, None), getattr(b, name, None)
        if va != vb:
            return name, va, vb
    return None


def check_actions(meta: ModelMeta, source: str = "model") -> None:
    """Refuse a model whose action list is not the table its own scan settings give.

    The table follows from the metadata's ``scan`` (``actions`` and ``tiles``, absent in
    a model of the default moves table; :func:`inspector.scan.action_names`); the station
    and the runtimes index it by position, so a model trained with another table (or by
    a version that names its actions otherwise) would move the viewport wrongly.

    :raises ModelError: the names or their order differ, or the scan names an action
        table this version does not know.
    """
    from inspector.profile import ScanSettings
    from inspector.scan import action_names

    try:
        want = action_names(ScanSettings(**dict(meta.scan)))
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{source}: broken model metadata: scan: {exc}") from None
    if tuple(meta.actions) != tuple(want):
        kind = meta.scan.get("actions", "moves")
        raise ModelError(
            f"{source}: the model's actions {list(meta.actions)} are not the table its scan "
            f"settings give (scan.actions {kind!r}: {list(want)}); the model was made by "
            "another version or its metadata was edited (re-export it)"
        )


def check_contract(meta: ModelMeta, shapes: Mapping[str, Any], source: str = "model") -> None:
    """Refuse a graph whose inputs or outputs do not fit its own metadata.

    A model whose metadata names more classes than its graph outputs (or any other
    such mismatch) would start and then fail every part; this makes it one line at
    start instead.

    :param meta: the model's metadata.
    :param shapes: name -> shape of each graph input and output, batch first; a
        dimension that is not an int (symbolic, dynamic) is not checked.
    :param source: the file, for the message.
    :raises ModelError: a missing tensor or a static dimension that does not fit.
    """
    check_actions(meta, source)
    for key in ("glimpse", "overview", "memory"):
        v = meta.scan.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100_000:
            raise ModelError(f"{source}: broken model metadata: scan.{key} is {v!r:.40}")
    for name, want in meta.expected_shapes().items():
        if name not in shapes:
            raise ModelError(f"{source}: the graph has no {name!r} tensor")
        got = list(shapes[name])
        if len(got) != 1 + len(want):
            raise ModelError(
                f"{source}: {name} has {len(got)} dimensions, the contract says "
                f"{1 + len(want)} ([N, {', '.join(map(str, want))}])"
            )
        for k, (g, w) in enumerate(zip(got[1:], want), start=1):
            if isinstance(g, int) and g > 0 and g != w:
                what = {
                    "class_probs": f"the metadata names {w} classes",
                    "action_logits": f"the metadata names {w} actions",
                }.get(name, f"the metadata implies {w}")
                raise ModelError(
                    f"{source}: {name} dimension {k} is {g} but {what}; "
                    f"the model file is inconsistent (re-export it)"
                )


def decide_verdict(probs: np.ndarray, outcome_matrix: np.ndarray, ok_bias: float = 0.0) -> int:
    """The class c maximising sum_y p(y) * R[c, y] (expected outcome reward).

    Falls back to argmax p when the matrix is all zeros.

    :param ok_bias: the operating point: log-odds added to the ok class (index 0) first.
    """
    p = shift_ok(np.asarray(probs, dtype=np.float64), ok_bias)
    m = np.asarray(outcome_matrix, dtype=np.float64)
    if not np.any(m):
        return int(np.argmax(p))
    return int(np.argmax(m @ p))


class Policy:
    """A loaded policy. Subclasses implement :meth:`forward`.

    :param meta: the model's metadata.
    """

    backend: str = "abstract"

    def __init__(self, meta: ModelMeta) -> None:
        self.meta = meta
        self.stop_action = meta.actions.index("stop") if "stop" in meta.actions else -1

    @property
    def classes(self) -> tuple[str, ...]:
        """Verdict classes."""
        return self.meta.classes

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batched outputs (action_logits [N, A], class_probs [N, C], value [N, 1])."""
        raise NotImplementedError

    def act(self, obs: Mapping[str, np.ndarray]) -> tuple[int, np.ndarray]:
        """Greedy action and class probabilities for one (unbatched) observation."""
        batch = {k: np.asarray(obs[k], dtype=np.float32)[None] for k in INPUT_NAMES}
        logits, probs, _ = self.forward(batch)
        return int(np.argmax(logits[0])), probs[0]

    def verdict(self, probs: np.ndarray) -> str:
        """The class to declare given class probabilities (profile decision rule)."""
        return self.meta.classes[decide_verdict(probs, self.meta.outcome_matrix, self.meta.ok_bias)]

    def close(self) -> None:
        """Release resources."""
