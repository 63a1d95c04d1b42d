"""A third-party reward term: a bonus for every successful zoom-in."""

from __future__ import annotations

from inspector import PROCESS, RewardTerm, StepContext, hookimpl


class BonusForZoom(RewardTerm):
    """Pays ``reward`` when a ``zoom_in`` action changed the view.

    :param reward: paid per successful zoom-in.
    :param per_level: multiply by the zoom level reached.
    """

    name = "bonus_for_zoom"
    channel = PROCESS
    summary = "bonus for each successful zoom-in (demo plugin)"

    def __init__(self, reward: float = 0.1, per_level: bool = False) -> None:
        super().__init__(reward)
        self.per_level = per_level

    def __call__(self, ctx: StepContext) -> float:
        if ctx.action != "zoom_in" or not ctx.moved:
            return 0.0
        return float(self.reward) * (ctx.level if self.per_level else 1)


@hookimpl
def register_reward_terms(register) -> None:
    """Register ``bonus_for_zoom``."""
    register(BonusForZoom.name, BonusForZoom)
