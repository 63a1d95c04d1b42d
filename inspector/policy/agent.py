"""Run the agent on one part: the loop shared by ``eval``, the station and the benchmarks.

The observation comes from :class:`inspector.scan.Scanner`, the same code the
training environment uses, so train and deploy see the same pixels.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from inspector.policy.base import Policy
from inspector.scan import PathPoint, Scanner


@dataclass
class Decision:
    """What the agent decided about one part.

    :param verdict: the declared class.
    :param probabilities: class probabilities at the decision.
    :param steps: actions taken (moves, zooms and the stop).
    :param path: the glimpse path (centre and zoom of every glimpse).
    :param actions: the action indices taken.
    :param stopped: the agent chose ``stop`` (False: the step budget ran out and the
        classifier's verdict at that point was taken).
    :param pixel_fraction: native-resolution pixels examined / pixels in the frame.
    :param native_glimpses: glimpses taken at native resolution.
    :param latency_s: wall time of the decision.
    """

    verdict: str
    probabilities: np.ndarray
    steps: int
    path: list[PathPoint]
    actions: list[int] = field(default_factory=list)
    stopped: bool = True
    pixel_fraction: float = 0.0
    native_glimpses: int = 0
    latency_s: float = 0.0


def run_episode(
    policy: Policy,
    scanner: Scanner,
    image: np.ndarray,
    budget: int,
    stop_on_defect: bool = False,
) -> Decision:
    """Scan, focus and decide on one frame with ``policy``.

    :param policy: any backend behind :class:`Policy`.
    :param scanner: a scanner built from the model's scan settings (its action table).
    :param image: the frame (gray or BGR uint8).
    :param budget: the step budget; when it runs out the classifier decides.
    :param stop_on_defect: also stop as soon as the verdict at the model's operating point
        (:meth:`Policy.verdict`, its ok bias) is a defect: the early-out of a search once
        the evidence is in, whatever the move head says (no effect without an ok class).
    """
    t0 = time.perf_counter()
    obs = scanner.reset(image)
    actions: list[int] = []
    probs = None
    stopped = False
    ok = policy.meta.ok_class if stop_on_defect else None
    for _ in range(max(1, budget)):
        a, probs = policy.act(obs)
        if ok is not None and policy.verdict(probs) != ok:
            a = scanner.stop
        actions.append(a)
        if a == scanner.stop:
            stopped = True
            break
        obs, _, _ = scanner.step(a)
    if not stopped:
        # Budget spent: the classifier judges what the agent has seen so far.
        _, probs = policy.act(obs)
    verdict = policy.verdict(probs)
    native = sum(1 for p in scanner.path if p.zoom == scanner.levels - 1)
    return Decision(
        verdict=verdict,
        probabilities=np.asarray(probs, dtype=np.float64),
        steps=len(actions),
        path=list(scanner.path),
        actions=actions,
        stopped=stopped,
        pixel_fraction=scanner.pixel_fraction(),
        native_glimpses=native,
        latency_s=time.perf_counter() - t0,
    )
