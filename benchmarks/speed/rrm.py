"""RRM benchmark: the cost of reward redistribution against one PPO update, same rollout.

A HybridPPO built by ``build_model`` (reward_profiles/lcd_panel.yaml, default
TrainConfig but 2,048 steps x 8 envs per rollout, scripted teacher) collects a real
rollout from 512x512 synthetic panels. On that rollout the benchmark times
``RRMRolloutBuffer.rrm_pipeline`` (redistribution of every complete episode,
then the profile's normalisation) once per method, and ``HybridPPO.train()``, one
PPO update with the default epochs and minibatch size. The figure is the ratio
pipeline / update per method (the baseline is the update, measured in the same run).

The rollout is collected with the RRM switched off, so the buffer keeps the
environment's raw rewards and each method's pipeline starts from the same data;
the update's cost does not depend on the reward values.

Run from the repository root::

    python -m benchmarks.speed.rrm [--quick]

Writes the ``rrm`` section of docs/benchmarks.md. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

from benchmarks.harness import ROOT, load_average, parser, table, torch_threads, write_section
from inspector.profile import RRMConfig, load_profile
from inspector.train.config import TrainConfig

PROFILE = str(ROOT / "reward_profiles" / "lcd_panel.yaml")
METHODS = ("exponential", "uniform", "shuffled", "learned")
GOAL_RATIO = 0.05


def collect_rollout(model) -> None:
    """Fill ``model.rollout_buffer`` with one rollout (as ``learn`` does, without training)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class _Nop(BaseCallback):
        def _on_step(self) -> bool:
            return True

    cb = _Nop()
    if model._last_obs is None:  # first rollout: let SB3 reset the envs and the logger
        model._setup_learn(model.n_steps * model.n_envs, cb)
    cb.init_callback(model)
    model.collect_rollouts(model.env, cb, model.rollout_buffer, model.n_steps)


@dataclass
class RRMBenchmark:
    """Median seconds per rollout of each pipeline and of the PPO update."""

    n_steps: int
    n_envs: int
    pipeline: dict[str, float]
    update: float
    collect: float
    complete_episodes: float
    repeats: int
    threads: int

    def ratio(self, method: str) -> float:
        """Pipeline time of ``method`` over the PPO update's."""
        return self.pipeline[method] / self.update


def build(
    cfg: TrainConfig,
    camera_params: dict,
    profile_path: str = PROFILE,
):
    """A HybridPPO (scripted teacher) on ``n_envs`` synthetic envs, its RRM switched off."""
    from inspector.train.runner import build_model, make_vec_env

    profile = load_profile(profile_path)
    env = make_vec_env(profile_path, "synthetic", camera_params, cfg, teacher=True)
    model = build_model(env, profile, cfg, "scripted", None)
    # Collect raw rewards: compute_returns_and_advantage then skips the pipeline.
    model.rollout_buffer.rrm = RRMConfig()
    return model, profile


def with_method(rrm: RRMConfig, method: str) -> RRMConfig:
    """``rrm`` with its redistribution method replaced."""
    return dataclasses.replace(
        rrm, redistribution=dataclasses.replace(rrm.redistribution, method=method)
    )


def measure(
    n_steps: int = 2048,
    n_envs: int = 8,
    repeats: int = 1,
    inner: int = 3,
    size: int = 512,
    methods: tuple[str, ...] = ("none", *METHODS),
    cfg: TrainConfig | None = None,
    profile_path: str = PROFILE,
) -> RRMBenchmark:
    """Collect ``repeats`` rollouts; on each time every pipeline and one PPO update.

    :param n_steps: steps per env per rollout.
    :param n_envs: environments.
    :param repeats: rollouts (a fresh one per repeat; medians are reported).
    :param inner: timings of each pipeline per rollout (median taken).
    :param size: frame side in pixels.
    :param methods: redistribution methods to time (``none``: normalisation only).
    :param cfg: the training config (default TrainConfig with n_steps and n_envs set).
    :param profile_path: the reward profile.
    """
    import torch

    cfg = (cfg or TrainConfig()).replace(n_steps=n_steps, n_envs=n_envs, vec_env="dummy")
    model, profile = build(cfg, {"size": size, "seed": 0}, profile_path)
    buf = model.rollout_buffer
    pipe: dict[str, list[float]] = {m: [] for m in methods}
    updates, collects, complete = [], [], []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            collect_rollout(model)
            collects.append(time.perf_counter() - t0)
            last_dones = np.asarray(buf.last_dones, dtype=bool)
            for m in methods:
                buf.rrm = with_method(profile.rrm, m)
                times = []
                for _ in range(inner):
                    t0 = time.perf_counter()
                    buf.rrm_pipeline(last_dones)
                    times.append(time.perf_counter() - t0)
                pipe[m].append(statistics.median(times))
                complete.append(buf.stats.get("rrm/complete_episodes", 0.0))
            buf.rrm = RRMConfig()
            t0 = time.perf_counter()
            model.train()
            updates.append(time.perf_counter() - t0)
    finally:
        model.env.close()
    med = statistics.median
    return RRMBenchmark(
        n_steps=n_steps,
        n_envs=n_envs,
        pipeline={m: med(v) for m, v in pipe.items()},
        update=med(updates),
        collect=med(collects),
        complete_episodes=med(complete),
        repeats=repeats,
        threads=torch.get_num_threads(),
    )


def report(b: RRMBenchmark, cfg: TrainConfig) -> tuple[str, bool]:
    """The markdown body and whether every method meets the goal."""
    rows = []
    ok = True
    for m, s in b.pipeline.items():
        r = b.ratio(m)
        if m in METHODS:
            ok = ok and r <= GOAL_RATIO
            verdict = "meets" if r <= GOAL_RATIO else "**MISSES**"
        else:
            verdict = "- (normalisation only, for reference)"
        rows.append([f"`rrm_pipeline`, {m}", f"{s * 1e3:,.1f}", f"{100 * r:.2f} %", verdict])
    rows.append(
        ["baseline: `HybridPPO.train()` (one PPO update)", f"{b.update * 1e3:,.0f}", "100 %", "-"]
    )
    steps = b.n_steps * b.n_envs
    n_batches = cfg.n_epochs * -(-steps // cfg.batch_size)
    body = (
        table(
            ["what", "ms per rollout", "vs PPO update", f"goal <= {100 * GOAL_RATIO:.0f} %"], rows
        )
        + f"\nOne rollout of {b.n_steps:,} steps x {b.n_envs} envs ({steps:,} steps, "
        f"{b.complete_episodes:,.0f} complete episodes) collected by a fresh HybridPPO "
        "(scripted teacher) from reward_profiles/lcd_panel.yaml on 512x512 synthetic panels; "
        f"the update is the default TrainConfig's {cfg.n_epochs} epochs x minibatch "
        f"{cfg.batch_size} ({n_batches:,} minibatches) with the hybrid loss "
        f"(w {cfg.w_rl}/{cfg.w_sl}/{cfg.w_kd}). Pipelines include the profile's running "
        "normalisation; `learned` includes the return predictor's online fit. "
        f"Median of {b.repeats} rollout(s), each pipeline timed 3 times per rollout; "
        f"torch {b.threads} thread(s). Collecting the rollout took {b.collect:,.1f} s.\n"
    )
    return body, ok


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section; return 0 (1 when the goal is missed)."""
    ap = parser(__doc__, quick="one rollout instead of three")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    import torch

    # One thread by default: these networks are small, and on a shared machine torch's
    # OpenMP barriers stall for milliseconds when a second thread is descheduled.
    torch_threads(args.threads)
    torch.manual_seed(0)
    load = load_average()
    repeats = 1 if args.quick else 3
    cfg = TrainConfig().replace(n_steps=2048, n_envs=8)
    b = measure(2048, 8, repeats=repeats, cfg=cfg)
    body, ok = report(b, cfg)
    body += f"\nLoad average at the start: {load:.1f}.\n"
    cmd = "python -m benchmarks.speed.rrm" + (" --quick" if args.quick else "")
    if args.threads != 1:
        cmd += f" --threads {args.threads}"
    print(body)
    if not args.no_write:
        print(
            f"wrote {write_section('rrm', 'Reward redistribution cost', body, cmd, doc=args.doc)}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
