"""The typed record one environment step hands the RRM rollout buffer.

:class:`inspector.env.InspectionEnv` puts one :class:`StepRecord` into each step's
``info["step"]``; :class:`inspector.rrm.buffer.RRMRolloutBuffer` and the reward-trace
explainer read it instead of loose ``info`` keys. The channel weights of the profile
(``rrm.channels``) are applied once, by the env, when the record is made.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The ``info`` key that carries the record.
INFO_KEY = "step"


@dataclass(frozen=True)
class StepRecord:
    """One step's rewards by channel, the shaping potentials, and the training targets.

    :param reward: the reward the env returned (``outcome + process``).
    :param outcome: the outcome channel, weighted by ``rrm.channels.outcome``.
    :param process: the process channel, weighted by ``rrm.channels.process``.
    :param phi_prev: the shaping potential before the step (unscaled by gamma).
    :param phi: the potential after it (0 after a verdict).
    :param label: the part's true class index (-1 unlabelled).
    :param teacher_next: the scripted teacher's action for the next observation
        (-1 when the env has no teacher or the episode ended).
    :param teacher_verdict_next: the verdict the next observation supports (-1 likewise).
    """

    reward: float
    outcome: float
    process: float
    phi_prev: float
    phi: float
    label: int
    teacher_next: int = -1
    teacher_verdict_next: int = -1
