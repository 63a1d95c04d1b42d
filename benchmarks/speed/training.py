"""Training benchmark: HybridPPO steps/s against plain SB3 PPO, same env and config.

Both learn on reward_profiles/lcd_panel.yaml over 512x512 synthetic panels with
the default TrainConfig (n_envs, n_steps, minibatch, epochs, learning-rate
schedule) and the same network (the ``policy_kwargs`` that ``build_model``
gives HybridPPO are handed to PPO unchanged):

* **HybridPPO**, built by ``build_model``: hybrid loss w 0.7/0.2/0.1, the scripted
  teacher (the env computes its action at every step), the profile's exponential
  redistribution and running normalisation in the rollout buffer;
* **baseline: plain PPO** (``stable_baselines3.PPO``), its own rollout buffer, the
  env without the teacher.

The figure is HybridPPO's steps/s as a ratio of plain PPO's in the same run; the
two alternate within each repeat so that drift hits both alike.

Run from the repository root::

    python -m benchmarks.speed.training [--quick]

Writes the ``training`` section of docs/benchmarks.md. Exit status 1 when the goal is missed.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass

from benchmarks.harness import ROOT, load_average, parser, table, torch_threads, write_section
from inspector.profile import load_profile
from inspector.train.config import TrainConfig

PROFILE = str(ROOT / "reward_profiles" / "lcd_panel.yaml")
GOAL_RATIO = 0.85


def build_pair(cfg: TrainConfig, camera_params: dict, profile_path: str = PROFILE):
    """(HybridPPO as ``train`` builds it, plain PPO with the same settings and network)."""
    from stable_baselines3 import PPO

    from inspector.train.runner import build_model, cosine_schedule, make_vec_env

    profile = load_profile(profile_path)
    env_h = make_vec_env(profile_path, "synthetic", camera_params, cfg, teacher=True)
    hybrid = build_model(env_h, profile, cfg, "scripted", None)
    env_p = make_vec_env(profile_path, "synthetic", camera_params, cfg, teacher=False)
    plain = PPO(
        "MultiInputPolicy",
        env_p,
        n_steps=cfg.n_steps,
        batch_size=cfg.batch_size,
        n_epochs=cfg.n_epochs,
        gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda,
        clip_range=cfg.clip_range,
        ent_coef=cfg.ent_coef,
        vf_coef=cfg.vf_coef,
        max_grad_norm=cfg.max_grad_norm,
        learning_rate=cosine_schedule(cfg.learning_rate, cfg.lr_floor),
        seed=cfg.seed,
        device="cpu",
        policy_kwargs=dict(hybrid.policy_kwargs),
    )
    return hybrid, plain


def steps_per_s(model, timesteps: int) -> float:
    """Wall-clock steps/s of ``model.learn(timesteps)`` (collection and updates)."""
    t0 = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=True, progress_bar=False)
    dt = time.perf_counter() - t0
    return model.num_timesteps / dt


@dataclass
class TrainingBenchmark:
    """Median steps/s of each learner."""

    hybrid: float
    plain: float
    timesteps: int
    repeats: int
    threads: int

    @property
    def ratio(self) -> float:
        """HybridPPO steps/s over plain PPO steps/s."""
        return self.hybrid / self.plain


def measure(
    timesteps: int = 4096,
    repeats: int = 1,
    size: int = 512,
    cfg: TrainConfig | None = None,
    profile_path: str = PROFILE,
) -> TrainingBenchmark:
    """Time both learners for ``timesteps`` each, ``repeats`` times, alternating.

    :param timesteps: environment steps per learn call (rounded up by SB3 to rollouts).
    :param repeats: learn calls per learner; medians are reported.
    :param size: frame side in pixels.
    :param cfg: the training config (default TrainConfig).
    :param profile_path: the reward profile.
    """
    import torch

    cfg = cfg or TrainConfig()
    hybrid, plain = build_pair(cfg, {"size": size, "seed": 0}, profile_path)
    h, p = [], []
    try:
        for r in range(repeats):
            order = (hybrid, plain) if r % 2 == 0 else (plain, hybrid)
            for model in order:
                rate = steps_per_s(model, timesteps)
                (h if model is hybrid else p).append(rate)
    finally:
        hybrid.env.close()
        plain.env.close()
    med = statistics.median
    return TrainingBenchmark(med(h), med(p), timesteps, repeats, torch.get_num_threads())


def report(b: TrainingBenchmark, cfg: TrainConfig) -> tuple[str, bool]:
    """The markdown body and whether the goal is met."""
    ok = b.ratio >= GOAL_RATIO
    rows = [
        [
            f"HybridPPO (w {cfg.w_rl}/{cfg.w_sl}/{cfg.w_kd}, scripted teacher, exponential RRM)",
            f"{b.hybrid:,.0f}",
            f"{b.ratio:.2f}x",
        ],
        ["baseline: plain SB3 PPO, same env, config and network", f"{b.plain:,.0f}", "1.00x"],
    ]
    verdict = "meets" if ok else "**MISSES**"
    body = (
        table(["learner", "steps/s", "vs plain PPO"], rows)
        + f"\nreward_profiles/lcd_panel.yaml, 512x512 synthetic panels, default TrainConfig: "
        f"{cfg.n_envs} envs ({cfg.vec_env} vec env) x {cfg.n_steps} steps per rollout, "
        f"minibatch {cfg.batch_size}, {cfg.n_epochs} epochs, CNN width {cfg.cnn_channels}, "
        f"features {cfg.features_dim}, heads {list(cfg.net_arch)}; torch {b.threads} thread(s). "
        f"{b.timesteps:,} steps per learner per repeat, median of {b.repeats} repeat(s), the "
        f"learners alternating. HybridPPO runs at **{b.ratio:.2f}x** plain PPO's speed: "
        f"{verdict} the goal of >= {GOAL_RATIO:.2f}x.\n"
    )
    return body, ok


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section; return 0 (1 when the goal is missed)."""
    ap = parser(__doc__, quick="~4k steps per learner, one repeat")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    import torch

    # One thread by default: these networks are small, and on a shared machine torch's
    # OpenMP barriers stall for milliseconds when a second thread is descheduled.
    torch_threads(args.threads)
    torch.manual_seed(0)
    load = load_average()
    timesteps, repeats = (4096, 1) if args.quick else (16384, 3)
    cfg = TrainConfig()
    b = measure(timesteps, repeats, cfg=cfg)
    body, ok = report(b, cfg)
    body += f"\nLoad average at the start: {load:.1f}.\n"
    cmd = "python -m benchmarks.speed.training" + (" --quick" if args.quick else "")
    if args.threads != 1:
        cmd += f" --threads {args.threads}"
    print(body)
    if not args.no_write:
        print(f"wrote {write_section('training', 'Training steps/s', body, cmd, doc=args.doc)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
