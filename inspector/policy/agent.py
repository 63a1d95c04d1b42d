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
    :param capped: the search stopped at the search depth: the agent chose to look
        deeper than the model's ``max_zoom`` and declared on what it had seen instead.
    :param deeper: (step, level, class probabilities) each time the agent first chose
        an action that looks deeper than any before it (the level it asked for): the
        same episode under a search depth ``d`` ends at the first entry with a level
        above ``d``, with those probabilities (:func:`capped_at`).
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
    capped: bool = False
    deeper: list[tuple[int, int, np.ndarray]] = field(default_factory=list)


def run_episode(
    policy: Policy,
    scanner: Scanner,
    image: np.ndarray,
    budget: int,
    stop_on_defect: bool = False,
    max_zoom: int | None = None,
) -> Decision:
    """Scan, focus and decide on one frame with ``policy``.

    :param policy: any backend behind :class:`Policy`.
    :param scanner: a scanner built from the model's scan settings (its action table).
    :param image: the frame (gray or BGR uint8).
    :param budget: the step budget; when it runs out the classifier decides.
    :param stop_on_defect: also stop as soon as the verdict at the model's operating point
        (:meth:`Policy.verdict`, its ok bias) is a defect: the early-out of a search once
        the evidence is in, whatever the move head says (no effect without an ok class).
    :param max_zoom: the search depth: an action that would look at a deeper zoom level
        becomes ``stop`` (the verdict is then on what has been seen). None: the model's
        calibrated depth (``policy.meta.max_zoom``, itself None for every level); pass
        ``scanner.levels - 1`` to search every level whatever the model says.
    """
    t0 = time.perf_counter()
    obs = scanner.reset(image)
    actions: list[int] = []
    probs = None
    stopped = False
    ok = policy.meta.ok_class if stop_on_defect else None
    depth = policy.meta.max_zoom if max_zoom is None else max_zoom
    capped = False
    deeper: list[tuple[int, int, np.ndarray]] = []
    for _ in range(max(1, budget)):
        a, probs = policy.act(obs)
        if ok is not None and policy.verdict(probs) != ok:
            a = scanner.stop
        level = scanner.level_after(a) if a != scanner.stop else -1
        if level > (deeper[-1][1] if deeper else 0):
            deeper.append((len(actions), level, np.asarray(probs, dtype=np.float64)))
        if depth is not None and level > depth:
            a, capped = scanner.stop, True
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
        capped=capped,
        deeper=deeper,
    )


def capped_at(decision: Decision, max_zoom: int) -> tuple[np.ndarray, int]:
    """The class probabilities and actions of ``decision``'s episode had its search depth
    been ``max_zoom``: (probabilities, actions taken, the stop included).

    Exact for an episode run with no smaller depth and without ``stop_on_defect``: a
    depth only turns the first action that looks deeper into ``stop``, and a policy is
    deterministic, so everything before it is the same.
    """
    for step, level, probs in decision.deeper:
        if level > max_zoom:
            return probs, step + 1
    return decision.probabilities, decision.steps
