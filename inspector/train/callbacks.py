"""The run's SB3 callback: progress bar, per-term TensorBoard means, checkpoints."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from inspector.train.checkpoints import save_checkpoint
from inspector.train.config import TrainConfig


def run_callback(out: Path, cfg: TrainConfig, total: int, progress: bool, clock: Any = None):
    """The callback; ``clock`` (:class:`inspector.train.phases.PhaseClock`) is flushed at
    each checkpoint."""
    from stable_baselines3.common.callbacks import BaseCallback

    class RunCallback(BaseCallback):
        """Progress bar, per-term TensorBoard means, checkpoints at rollout boundaries."""

        def __init__(self) -> None:
            super().__init__()
            self.recent = deque(maxlen=200)
            self.steps_recent = deque(maxlen=200)
            self.term_sums: dict[str, float] = {}
            self.term_n = 0
            self.native = 0
            self.t0 = time.time()
            self.n0 = 0
            self.last_ckpt = 0
            self.bar = None

        def _on_training_start(self) -> None:
            self.n0 = self.num_timesteps
            self.last_ckpt = self.num_timesteps
            if progress:
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=self.num_timesteps, unit="step", ncols=100)

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                for k, v in info.get("terms", {}).items():
                    self.term_sums[k] = self.term_sums.get(k, 0.0) + v
                self.term_n += 1
                self.native += int(bool(info.get("native")))
                if "correct" in info and "steps" in info:
                    self.recent.append(float(info["correct"]))
                    self.steps_recent.append(info["steps"])
            if self.bar is not None:
                self.bar.n = self.num_timesteps
                rate = (self.num_timesteps - self.n0) / max(1e-6, time.time() - self.t0)
                acc = np.mean(self.recent) if self.recent else float("nan")
                self.bar.set_postfix_str(f"{rate:.0f} steps/s, acc {acc:.2f}", refresh=False)
                self.bar.update(0)
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

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    return RunCallback()
