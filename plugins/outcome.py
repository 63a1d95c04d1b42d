"""Outcome terms: what the verdict is worth.

Each term answers one question about the declared class against the true one
(:meth:`verdict_value`), so ``Profile.outcome_matrix`` and the verdict decision
rule can ask the same terms the environment pays. A term pays only on the step
that ends the episode with a verdict, and pays nothing on unlabelled footage
(there is no truth to compare with). ``no_verdict`` is the exception: running out
of budget is a fact about the episode, not about the label, so it pays on any part.

Per-class terms take ``reward`` as a number or as a mapping class -> value; which
class the mapping is keyed by is stated on each term (the true class for misses and
wrong classes, the declared class for false alarms).
"""

from __future__ import annotations

from typing import ClassVar

from inspector import OUTCOME, RewardTerm, StepContext, hookimpl


class _VerdictTerm(RewardTerm):
    """Pays ``verdict_value`` once, when the episode ends with a verdict on a labelled part."""

    channel = OUTCOME
    per_class = True

    def __call__(self, ctx: StepContext) -> float:
        if not ctx.terminated or ctx.verdict is None or ctx.label is None:
            return 0.0
        ep = ctx.episode
        return self.verdict_value(ctx.verdict, ctx.label, ep.classes, ep.ok_class)


class CorrectClass(_VerdictTerm):
    """The verdict names the true class; ``reward`` per class is keyed by that class.

    :param reward: a number, or class -> value (e.g. ``{line: 0.5, point: 0.2, ok: 0.2}``).
    """

    name = "correct_class"
    summary = "verdict == true class; per-class value keyed by the class"
    reward_sign: ClassVar[int] = 1

    def __init__(self, reward: float | dict[str, float] = 1.0) -> None:
        super().__init__(reward)

    def verdict_value(self, verdict: str, label: str, classes: tuple[str, ...], ok: str) -> float:
        return self.value_for(label) if verdict == label else 0.0


class FalseAlarm(_VerdictTerm):
    """A defect class declared on an ok part; per-class values keyed by the declared class.

    :param reward: a (negative) number, or declared class -> value.
    """

    name = "false_alarm"
    summary = "defect declared on an ok part; per-class value keyed by the declared class"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float | dict[str, float] = -1.0) -> None:
        super().__init__(reward)

    def verdict_value(self, verdict: str, label: str, classes: tuple[str, ...], ok: str) -> float:
        return self.value_for(verdict) if label == ok and verdict != ok else 0.0


class MissedDefect(_VerdictTerm):
    """``ok`` declared on a defective part; per-class values keyed by the true (missed) class.

    :param reward: a (negative) number, or true class -> value.
    """

    name = "missed_defect"
    summary = "ok declared on a defective part; per-class value keyed by the missed class"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float | dict[str, float] = -1.0) -> None:
        super().__init__(reward)

    def verdict_value(self, verdict: str, label: str, classes: tuple[str, ...], ok: str) -> float:
        return self.value_for(label) if verdict == ok and label != ok else 0.0


class WrongClass(_VerdictTerm):
    """A defect found but named wrongly; per-class values keyed by the true class.

    :param reward: a (negative) number, or true class -> value.
    """

    name = "wrong_class"
    summary = "defect class declared, but not the true one; keyed by the true class"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float | dict[str, float] = -0.5) -> None:
        super().__init__(reward)

    def verdict_value(self, verdict: str, label: str, classes: tuple[str, ...], ok: str) -> float:
        if verdict != ok and label != ok and verdict != label:
            return self.value_for(label)
        return 0.0


class NoVerdict(RewardTerm):
    """The step budget ran out before a verdict (paid on the truncating step).

    :param reward: a (negative) number.
    """

    name = "no_verdict"
    channel = OUTCOME
    summary = "the step budget ran out without a verdict"
    reward_sign: ClassVar[int] = -1

    def __init__(self, reward: float = -1.0) -> None:
        super().__init__(reward)

    def __call__(self, ctx: StepContext) -> float:
        if ctx.truncated and not ctx.terminated:
            return float(self.reward)
        return 0.0

    # verdict_value stays 0: declaring any class is, by definition, not "no verdict".


TERMS: tuple[type[RewardTerm], ...] = (
    CorrectClass,
    FalseAlarm,
    MissedDefect,
    WrongClass,
    NoVerdict,
)


@hookimpl
def register_reward_terms(register) -> None:
    """Register the outcome terms."""
    for cls in TERMS:
        register(cls.name, cls)
