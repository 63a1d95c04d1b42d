"""Process terms about how the agent spends its steps: cost, coverage, revisits."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from inspector import PROCESS, EpisodeContext, RewardTerm, StepContext, hookimpl, level_ok


class StepCost(RewardTerm):
    """A fixed cost on every step, ``stop`` included, so dawdling is never free.

    :param reward: a negative number (e.g. -0.01).
    """

    name = "step_cost"
    channel = PROCESS
    summary = "paid on every step (make it negative)"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float = -0.01) -> None:
        super().__init__(reward)
        self._r = float(reward)

    def __call__(self, ctx: StepContext) -> float:
        return self._r


class Coverage(RewardTerm):
    """New frame area seen at level >= ``min_level``, as a fraction of the frame, times reward.

    As a shaping potential (``rrm.shaping.potential: coverage``) Phi is the fraction seen so
    far times ``scale``; the potential keeps its own record of what it has seen, so it does
    not depend on the reward term being in ``terms:`` too.

    :param reward: value of covering the whole frame.
    :param min_level: zoom level from which a glimpse counts (-1: native only).
    """

    name = "coverage"
    channel = PROCESS
    is_potential = True
    summary = "new area seen while zoomed in, as a fraction of the frame"
    reward_sign: ClassVar[int] = 1
    param_ranges: ClassVar[dict[str, tuple[float, float]]] = {"min_level": (-8, 16)}

    def __init__(self, reward: float = 1.0, min_level: int = -1) -> None:
        super().__init__(reward)
        self.min_level = int(min_level)
        self._seen: np.ndarray | None = None
        self._covered = 0

    def reset(self, episode: EpisodeContext) -> None:
        h, w = episode.frame.image.shape[:2]
        if self._seen is None or self._seen.shape != (h, w):
            self._seen = np.zeros((h, w), dtype=bool)
        else:
            self._seen.fill(False)
        self._covered = 0

    def _visit(self, ctx: StepContext) -> int:
        """Mark the glimpse as seen (when zoomed in enough); return the new pixels."""
        if self._seen is None:
            self.reset(ctx.episode)
        if not level_ok(ctx, self.min_level):
            return 0
        x0, y0, x1, y1 = ctx.rect
        region = self._seen[max(0, y0) : max(0, y1), max(0, x0) : max(0, x1)]
        new = int(region.size - np.count_nonzero(region))
        if new:
            region[...] = True
            self._covered += new
        return new

    def __call__(self, ctx: StepContext) -> float:
        new = self._visit(ctx)
        if not new:
            return 0.0
        return float(self.reward) * new / self._seen.size

    def potential(self, ctx: StepContext | EpisodeContext) -> float:
        if isinstance(ctx, EpisodeContext):
            # The start of an episode: the overview shows nothing at native resolution.
            self.reset(ctx)
            return 0.0
        self._visit(ctx)
        return float(self.reward) * self._covered / self._seen.size


class Revisit(RewardTerm):
    """A penalty for looking again at a viewport already seen in this episode.

    :param reward: a negative number.
    :param include_blocked: also pay when a move or zoom did nothing (frame edge or zoom
        limit): the agent looks at the same viewport again.
    """

    name = "revisit"
    channel = PROCESS
    summary = "paid when the viewport was already visited (or the action did nothing)"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float = -0.05, include_blocked: bool = True) -> None:
        super().__init__(reward)
        self.include_blocked = bool(include_blocked)

    def __call__(self, ctx: StepContext) -> float:
        if ctx.action == "stop":
            return 0.0
        if ctx.revisit or (self.include_blocked and not ctx.moved):
            return float(self.reward)
        return 0.0


TERMS: tuple[type[RewardTerm], ...] = (StepCost, Coverage, Revisit)


@hookimpl
def register_reward_terms(register) -> None:
    """Register the process terms."""
    for cls in TERMS:
        register(cls.name, cls)
