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
  calibrated (:mod:`inspector.policy.operating_point`), ``inspector.ok_bias``; an
  ensemble (:mod:`inspector.policy.ensemble`) also ``inspector.ensemble``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
        move_fraction).
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
        return {META_PREFIX + k: json.dumps(v) for k, v in d.items()}

    @classmethod
    def from_props(cls, props: Mapping[str, str], source: str = "model") -> ModelMeta:
        """Parse metadata_props written by :meth:`to_props`.

        :raises ModelError: a key is missing or not valid JSON.
        """
        try:
            get = {
                k[len(META_PREFIX) :]: json.loads(v)
                for k, v in props.items()
                if k.startswith(META_PREFIX)
            }
            return cls(
                classes=tuple(get["classes"]),
                actions=tuple(get["actions"]),
                scan=dict(get["scan"]),
                state_size=int(get["state_size"]),
                outcome_matrix=np.asarray(get["outcome_matrix"], dtype=np.float64),
                profile_name=get.get("profile_name", ""),
                profile_sha256=get.get("profile_sha256", ""),
                model_sha256=get.get("model_sha256", ""),
                step_budget=int(get.get("step_budget", 0)),
                exporter_version=get.get("exporter_version", ""),
                ok_bias=float(get.get("ok_bias", 0.0)),
                ensemble=tuple(str(x) for x in get.get("ensemble", ())),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise ModelError(
                f"{source}: not an inspector model (metadata missing or broken: {exc})"
            ) from None


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
