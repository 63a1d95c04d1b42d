"""A badly behaved plugin: registers a name the built-ins already use (for the tests)."""

from __future__ import annotations

from inspector import PROCESS, RewardTerm, StepContext, hookimpl


class AnotherStepCost(RewardTerm):
    """Clashes with the built-in ``step_cost``."""

    name = "step_cost"
    channel = PROCESS

    def __call__(self, ctx: StepContext) -> float:
        return float(self.reward)


@hookimpl
def register_reward_terms(register) -> None:
    """Register a second ``step_cost``."""
    register(AnotherStepCost.name, AnotherStepCost)
