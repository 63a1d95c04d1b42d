"""What more than one study uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Weight of the scripted teacher's stop steps in the class-balanced verdict
#: cross-entropy (``TrainConfig.verdict_stop_weight``; the stop steps are ~7 % of the
#: cloned samples): ``--balanced-verdict`` of learning_efficiency and
#: ``--agent-balanced-verdict`` of quality_magnetic_tile.
BALANCED_STOP_WEIGHT = 8.0


def learn_with_curve(
    model: Any,
    timesteps: int,
    offset: int,
    eval_every: int,
    evaluate: Callable[[int], dict],
    curve: list[dict],
) -> list[dict]:
    """``model.learn(timesteps)``, evaluating along the way: the learning curve.

    Steps count from ``offset`` (the pretraining's crops and cloned steps, which a
    study counts as env steps). ``evaluate(steps)`` is appended to ``curve`` at the
    first rollout start at or past each ``eval_every`` steps, and once at the end.

    :returns: ``curve``.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    class Eval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = offset + eval_every

        def _on_rollout_start(self) -> None:
            if self.num_timesteps + offset >= self.next:
                self.next += eval_every
                curve.append(evaluate(self.num_timesteps + offset))

        def _on_step(self) -> bool:
            return True

    model.learn(timesteps, callback=Eval())
    curve.append(evaluate(model.num_timesteps + offset))
    return curve
