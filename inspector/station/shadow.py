"""Shadow models: a candidate judges the same frames beside the live model.

The live verdict is the one acted on and published. The shadow runs in a worker thread
of its own, started on the frame once the live verdict is in (so it never competes with
the live model while that decides); the station then waits for it at most ``budget_ms``
before it commits the result. A shadow that is
late, busy with the previous part, or fails is recorded as such (``shadow.skipped``)
and never holds up the live verdict beyond that budget. What it decided (verdict,
confidence, glimpse path, latency) travels in the result's ``shadow`` field, and from
there into footage, where ``inspector models compare`` reads it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import ModelError
from inspector.policy.base import first_difference

log = logging.getLogger(__name__)


@dataclass
class ShadowSection:
    """``shadow:`` in a station config: a candidate model run beside the live one.

    :param model: the candidate's exported model (``.onnx``, ``.engine``); none: off.
    :param budget_ms: how long the live result may wait for the shadow after the live
        verdict is in (0: never wait; a shadow still running is recorded as late). A
        budget above the shadow's own latency records every shadow verdict; the line's
        cycle time then grows by the shadow's latency.
    :param threads: intra-op threads for the shadow's backend (keep it off the live
        model's cores where the device has more than one).
    """

    model: str | None = None
    budget_ms: float = 50.0
    threads: int = 1

    def validate(self) -> None:
        """:raises ValueError: a negative budget or a missing model file."""
        if self.model is None:
            return
        if self.budget_ms < 0:
            raise ValueError(f"shadow.budget_ms must be >= 0, got {self.budget_ms}")
        if self.threads < 1:
            raise ValueError(f"shadow.threads must be >= 1, got {self.threads}")
        if not Path(self.model).is_file():
            raise ValueError(f"shadow.model not found: {self.model}")


class ShadowRunner:
    """Run a shadow policy on frames in a worker thread.

    :param policy: the shadow's policy (same classes and scan settings as the live one).
    :param scanner: a scanner of its own (scanners hold per-episode state).
    :param budget: its step budget.
    :param model_sha256: the shadow model file's hash (recorded with every verdict).
    :param budget_ms: see :class:`ShadowSection`.
    :param ok_class: the class that means ok (for the shadow's ``verdict``).
    """

    def __init__(self, policy: Any, scanner: Any, budget: int, model_sha256: str,
                 budget_ms: float, ok_class: str) -> None:  # fmt: skip
        self.ok_class = ok_class
        self.policy = policy
        self.scanner = scanner
        self.budget = int(budget)
        self.model_sha256 = model_sha256
        self.budget_s = max(0.0, float(budget_ms)) / 1e3
        self._jobs: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(maxsize=1)
        self._done: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._next = 0
        self.counts = {"decided": 0, "late": 0, "busy": 0, "failed": 0}
        self._thread = threading.Thread(target=self._work, name="shadow", daemon=True)
        self._thread.start()

    @classmethod
    def from_config(cls, section: ShadowSection, live_meta: Any, budget: int,
                    ok_class: str) -> ShadowRunner | None:  # fmt: skip
        """The runner ``shadow:`` asks for, or None when no shadow model is configured.

        :raises ModelError: the model cannot be loaded or does not match the live one.
        """
        if not section.model:
            return None
        from inspector.files import sha256_file
        from inspector.policy.load import load_policy
        from inspector.scan import Scanner

        policy = load_policy(Path(section.model), threads=section.threads)
        cls.check_compatible(live_meta, policy.meta, section.model)
        scanner = Scanner.from_metadata(policy.meta, budget)
        return cls(policy, scanner, budget, sha256_file(section.model), section.budget_ms,
                   ok_class=ok_class)  # fmt: skip

    @staticmethod
    def check_compatible(live_meta: Any, shadow_meta: Any, path: str) -> None:
        """:raises ModelError: the shadow has other classes or scan settings than live."""
        diff = first_difference(
            live_meta, shadow_meta, ("classes", "actions", "scan", "state_size")
        )
        if diff is not None:
            name, a, b = diff
            raise ModelError(
                f"shadow model {path}: {name} {b!r} differs from the live model's {a!r}"
            )

    def submit(self, image: np.ndarray) -> int | None:
        """Start the shadow on ``image``; a ticket for :meth:`collect`, None when busy."""
        with self._cond:
            ticket = self._next
            self._next += 1
        try:
            self._jobs.put_nowait((ticket, image))
        except queue.Full:
            self.counts["busy"] += 1
            return None
        return ticket

    def collect(self, ticket: int | None) -> dict[str, Any]:
        """The shadow's decision on that frame, waiting at most the budget."""
        if ticket is None:
            return {"model_sha256": self.model_sha256, "skipped": "busy"}
        deadline = time.monotonic() + self.budget_s
        with self._cond:
            while ticket not in self._done:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.counts["late"] += 1
                    return {"model_sha256": self.model_sha256, "skipped": "late"}
                self._cond.wait(left)
            return self._done.pop(ticket)

    def _work(self) -> None:
        from inspector.policy.agent import run_episode

        while True:
            job = self._jobs.get()
            if job is None:
                return
            ticket, image = job
            try:
                d = run_episode(self.policy, self.scanner, image, self.budget)
                classes = list(self.policy.meta.classes)
                probs = [float(p) for p in d.probabilities]
                out: dict[str, Any] = {
                    "model_sha256": self.model_sha256,
                    "verdict": "ok" if d.verdict == self.ok_class else "defect",
                    "label": d.verdict,
                    "confidence": probs[classes.index(d.verdict)],
                    "probabilities": dict(zip(classes, probs)),
                    "glimpse_path": [
                        {"x": float(p.x), "y": float(p.y), "zoom": int(p.zoom)} for p in d.path
                    ],
                    "steps": int(d.steps),
                    "latency_ms": 1e3 * float(d.latency_s),
                }
                self.counts["decided"] += 1
            except Exception as exc:  # a broken shadow never touches the live path
                log.debug("shadow failed", exc_info=True)
                self.counts["failed"] += 1
                out = {"model_sha256": self.model_sha256, "skipped": f"failed: {exc}"[:200]}
            with self._cond:
                self._done[ticket] = out
                # Late answers nobody collects: keep only the newest few.
                for old in [t for t in self._done if t < ticket - 4]:
                    del self._done[old]
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the worker (idempotent) and close the shadow's backend."""
        try:
            self._jobs.put(None, timeout=1.0)
        except queue.Full:
            pass
        self._thread.join(5.0)
        close = getattr(self.policy, "close", None)
        if callable(close):
            close()
