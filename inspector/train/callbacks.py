"""The run's SB3 callbacks: progress lines (:mod:`inspector.train.watch`), per-term
TensorBoard means, checkpoints."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from inspector.train.checkpoints import save_checkpoint
from inspector.train.config import TrainConfig


def run_callback(
    out: Path, cfg: TrainConfig, total: int, progress: bool, clock: Any = None
) -> list:
    """The run's callbacks (progress first); ``clock``
    (:class:`inspector.train.phases.PhaseClock`) is flushed at each checkpoint."""
    from stable_baselines3.common.callbacks import BaseCallback

    from inspector.train.watch import progress_callback

    class RunCallback(BaseCallback):
        """Per-term TensorBoard means, checkpoints at rollout boundaries."""

        def __init__(self) -> None:
            super().__init__()
            self.recent = deque(maxlen=200)
            self.steps_recent = deque(maxlen=200)
            self.term_sums: dict[str, float] = {}
            self.term_n = 0
            self.native = 0
            self.last_ckpt = 0

        def _on_training_start(self) -> None:
            self.last_ckpt = self.num_timesteps

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                for k, v in info.get("terms", {}).items():
                    self.term_sums[k] = self.term_sums.get(k, 0.0) + v
                self.term_n += 1
                self.native += int(bool(info.get("native")))
                if "correct" in info and "steps" in info:
                    self.recent.append(float(info["correct"]))
                    self.steps_recent.append(info["steps"])
            return True

        def _on_rollout_start(self) -> None:
            # The previous rollout is fully trained here: a safe point to checkpoint.
            if self.num_timesteps - self.last_ckpt >= cfg.checkpoint_interval:
                save_checkpoint(self.model, out)
                self.last_ckpt = self.num_timesteps
                if clock is not None:
                    clock.flush()

        def _on_rollout_end(self) -> None:
            rec = self.logger.record
            if self.term_n:
                for k, v in self.term_sums.items():
                    rec(f"terms/{k}", v / self.term_n)
                rec("rollout/native_share", self.native / self.term_n)
            if self.recent:
                rec("rollout/accuracy", float(np.mean(self.recent)))
                rec("rollout/mean_glimpses", float(np.mean(self.steps_recent)))
            self.term_sums, self.term_n, self.native = {}, 0, 0

    # The progress callback first: its timing then leaves out the others' checks.
    procs = 1 + (cfg.n_envs if cfg.vec_env == "subproc" and cfg.n_envs > 1 else 0)
    return [progress_callback(out, total, progress, processes=procs), RunCallback()]
