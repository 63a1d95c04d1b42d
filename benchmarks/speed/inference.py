"""Inference benchmark: per-glimpse and per-part latency of the runtime backends.

A policy for reward_profiles/lcd_panel.yaml is trained briefly with ``train_run``
(a run directory: model.zip + profile.yaml), exported with ``export_onnx`` and
quantised with ``quantize_int8``. A network's cost does not depend on its
weights, so a short run times the same as a long one; the verdicts and paths it
takes do depend on them (see the steps per part).

* **Per glimpse**: ``Policy.forward`` on one observation (batch 1), cycling through
  recorded observations, for torch eager (``TorchPolicy``, the baseline) and ONNX
  Runtime fp32 and int8 (``OrtPolicy``, CPU provider), at one thread and at each
  library's default thread count.
* **Per part**: a whole ``run_episode`` (scan, focus, verdict) over pre-rendered
  512x512 synthetic frames, as the policy decides it, and in the worst case, with
  ``stop`` masked so every part uses the full step budget.
* **int8 agreement**: ``compare`` of int8 against fp32 on recorded observations.

Run from the repository root::

    python -m benchmarks.speed.inference [--quick]

Writes the ``inference`` section of docs/benchmarks.md. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.harness import ROOT, load_average, parser, table, write_section
from benchmarks.speed.common import glimpse_latency, percentiles
from inspector.policy.base import Policy
from inspector.train.config import TrainConfig

PROFILE = str(ROOT / "reward_profiles" / "lcd_panel.yaml")
GOAL_SPEEDUP = 2.0
GOAL_P99_MS = 10.0


class NoStop(Policy):
    """``policy`` with ``stop`` masked: every part runs the whole step budget (worst case).

    :param policy: the policy to wrap.
    """

    def __init__(self, policy: Policy) -> None:
        super().__init__(policy.meta)
        self.inner = policy
        self.backend = policy.backend

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, p, v = self.inner.forward(obs)
        a = np.array(a, copy=True)
        a[:, self.stop_action] = -np.inf
        return a, p, v


def part_latency(
    policy: Policy, images: list[np.ndarray], budget: int, max_s: float = float("inf")
) -> tuple[list[float], list[int]]:
    """(seconds per part, steps per part) of ``run_episode`` over ``images``.

    :param max_s: stop early after this many seconds (at least 20 parts are timed).
    """
    from inspector.policy.agent import run_episode
    from inspector.scan import Scanner

    scanner = Scanner.from_metadata(policy.meta, budget)
    for img in images[:10]:  # warm up: the first parts run measurably slower
        run_episode(policy, scanner, img, budget)
    lat: list[float] = []
    steps: list[int] = []
    start = time.perf_counter()
    for img in images:
        d = run_episode(policy, scanner, img, budget)
        lat.append(d.latency_s)
        steps.append(d.steps)
        if time.perf_counter() - start > max_s and len(lat) >= 20:
            break
    return lat, steps


@dataclass
class Backend:
    """One backend configuration and its measurements (seconds).

    :param name: the backend.
    :param mode: ``1`` (one thread) or ``default`` (the library's default thread count).
    :param threads: the thread count as shown in the report.
    """

    name: str
    mode: str
    threads: str
    glimpse: list[float] = field(default_factory=list)
    part: list[float] = field(default_factory=list)
    part_steps: list[int] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)


@dataclass
class InferenceBenchmark:
    """Everything the report needs."""

    backends: list[Backend]
    agreement: dict[str, float]
    parity: dict[str, float]
    trained_steps: int
    budget: int
    n_parts: int
    onnx_bytes: int
    int8_bytes: int
    bc_samples: int = 0
    ensembles: list[tuple[int, Backend]] = field(default_factory=list)


def make_run(out: Path, timesteps: int, size: int, cfg: TrainConfig) -> int:
    """Train a run directory in ``out`` with ``train_run``; return its timesteps."""
    from inspector.train.runner import train_run

    cfg = cfg.replace(final_eval_episodes=0, checkpoint_interval=10**9)
    res = train_run(
        PROFILE,
        "synthetic",
        {"size": size, "seed": 0},
        timesteps,
        out,
        cfg,
        progress=False,
        evaluate_after=False,
    )
    return res.timesteps


def jittered_copy(run: Path, dest: Path, seed: int) -> Path:
    """A copy of a run with its weights jittered (noise 1e-3): an ensemble member that
    costs what any other does. Identical members would not: ONNX Runtime's
    common-subexpression elimination merges their identical subgraphs into one."""
    import shutil

    import torch

    from inspector.train.torch_policy import load_trained

    shutil.copytree(run, dest)
    model, _, _ = load_trained(dest)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.policy.parameters():
            param.add_(1e-3 * torch.randn(param.shape, generator=gen))
    model.save(str(dest / "model.zip"))
    return dest


def measure(
    workdir: Path,
    train_steps: int = 512,
    n_glimpse: int = 2000,
    n_parts: int = 200,
    n_obs: int = 1000,
    size: int = 512,
    cfg: TrainConfig | None = None,
    thread_modes: tuple[int, ...] = (1, 0),
    max_s: float = float("inf"),
    ensemble_sizes: tuple[int, ...] = (2, 4),
) -> InferenceBenchmark:
    """Train, export, quantise, then time every backend.

    :param workdir: where the run directory and the ONNX files go.
    :param train_steps: training timesteps of the policy.
    :param n_glimpse: batch-1 forward calls timed per backend.
    :param n_parts: parts (frames) decided per backend.
    :param n_obs: recorded observations (glimpse timing and int8 agreement).
    :param size: frame side in pixels.
    :param cfg: the training config (network size).
    :param thread_modes: thread counts to run (0: the library's default).
    :param max_s: time cap of each timing loop (see :func:`glimpse_latency`).
    :param ensemble_sizes: verdict ensembles (``export --ensemble``) timed in ORT fp32 at
        the first thread mode; the members are jittered copies of the run
        (:func:`jittered_copy`).
    """
    import torch

    from camera_drivers.synthetic import SyntheticCamera
    from inspector.export.onnx import compare, export_onnx, quantize_int8, record_observations
    from inspector.train.torch_policy import TorchPolicy, load_trained, meta_for_model

    default_torch = torch.get_num_threads()
    # Training and recording are not timed: one thread keeps them quick on a busy machine.
    torch.set_num_threads(1)
    cfg = cfg or TrainConfig()
    run = workdir / "run"
    trained = make_run(run, train_steps, size, cfg)
    fp32 = export_onnx(run, workdir / "model.onnx")
    int8 = quantize_int8(fp32, workdir / "model.int8.onnx")
    model, profile, sha = load_trained(run)
    torch_policy = TorchPolicy(model, meta_for_model(model, profile, sha))
    budget = profile.step_budget
    obs = record_observations(torch_policy, "synthetic", {"size": size, "seed": 1}, n_obs)
    cam = SyntheticCamera(size=size, seed=2)
    images = [cam.load(i).image for i in range(n_parts)]

    timing = _Timing(obs, images, budget, n_glimpse, max_s)
    backends, policies = _time_backends(
        torch_policy, fp32, int8, timing, thread_modes, default_torch
    )
    one = thread_modes[0]
    ensembles = _time_ensembles(run, workdir, timing, ensemble_sizes, one)
    ref = policies[("ORT fp32", one)]
    agreement = compare(ref, policies[("ORT int8", one)], obs)
    parity = compare(torch_policy, ref, obs)
    return InferenceBenchmark(
        backends=backends,
        agreement=agreement,
        parity=parity,
        trained_steps=trained,
        budget=budget,
        n_parts=n_parts,
        onnx_bytes=Path(fp32).stat().st_size,
        int8_bytes=Path(int8).stat().st_size,
        bc_samples=int(getattr(cfg, "bc_samples", 0)),
        ensembles=ensembles,
    )


@dataclass
class _Timing:
    """What every timed backend runs on, and how long each loop may take."""

    obs: dict[str, np.ndarray]
    images: list[np.ndarray]
    budget: int
    n_glimpse: int
    max_s: float

    def glimpse(self, policy: Policy) -> list[float]:
        return glimpse_latency(policy, self.obs, self.n_glimpse, max_s=self.max_s)

    def part(self, policy: Policy) -> tuple[list[float], list[int]]:
        return part_latency(policy, self.images, self.budget, max_s=self.max_s)


def _time_backends(
    torch_policy: Policy,
    fp32: Path,
    int8: Path,
    timing: _Timing,
    thread_modes: tuple[int, ...],
    default_torch: int,
) -> tuple[list[Backend], dict[tuple[str, int], Policy]]:
    """torch eager, ORT fp32 and ORT int8 at each thread mode: (their timings, the policies).

    :param default_torch: torch's own thread count (the "default" mode; torch is left
        with it after each mode).
    """
    import torch

    from inspector.policy.onnx_backend import OrtPolicy

    cpu = ["CPUExecutionProvider"]
    backends: list[Backend] = []
    policies: dict[tuple[str, int], Policy] = {}
    for threads in thread_modes:
        mode = "1" if threads == 1 else "default"
        policies[("torch eager", threads)] = torch_policy
        policies[("ORT fp32", threads)] = OrtPolicy(fp32, providers=cpu, threads=threads)
        policies[("ORT int8", threads)] = OrtPolicy(int8, providers=cpu, threads=threads)
        for name in ("torch eager", "ORT fp32", "ORT int8"):
            policy = policies[(name, threads)]
            label = mode
            if name == "torch eager":
                torch.set_num_threads(1 if threads == 1 else default_torch)
                label = "1" if threads == 1 else f"default ({default_torch})"
            b = Backend(name, mode, label)
            b.glimpse = timing.glimpse(policy)
            b.part, b.part_steps = timing.part(policy)
            b.worst, _ = timing.part(NoStop(policy))
            backends.append(b)
        torch.set_num_threads(default_torch)
    return backends, policies


def _time_ensembles(
    run: Path, workdir: Path, timing: _Timing, ensemble_sizes: tuple[int, ...], threads: int
) -> list[tuple[int, Backend]]:
    """ORT fp32 verdict ensembles of each size (jittered copies of ``run`` as members)."""
    from inspector.export.onnx import export_onnx
    from inspector.policy.onnx_backend import OrtPolicy

    ensembles = []
    others = [
        jittered_copy(run, workdir / f"member{i}", i)
        for i in range(max(ensemble_sizes, default=1) - 1)
    ]
    for k in ensemble_sizes:
        path = export_onnx(run, workdir / f"ensemble{k}.onnx", ensemble=others[: k - 1])
        policy = OrtPolicy(path, providers=["CPUExecutionProvider"], threads=threads)
        mode = "1" if threads == 1 else "default"
        b = Backend(f"ORT fp32, ensemble of {k}", mode, str(threads))
        b.glimpse = timing.glimpse(policy)
        b.worst, _ = timing.part(NoStop(policy))
        ensembles.append((k, b))
    return ensembles


def ensemble_text(b: InferenceBenchmark) -> str:
    """Markdown: what a verdict ensemble costs against its lead alone (ORT fp32)."""
    if not b.ensembles:
        return ""
    mode = b.ensembles[0][1].mode
    single = next(x for x in b.backends if x.name == "ORT fp32" and x.mode == mode)
    g1, w1 = percentiles(single.glimpse)[0], percentiles(single.worst)[1]
    rows = [["1 (the lead alone)", f"{g1 * 1e3:.3f}", "1.00x", f"{w1 * 1e3:.2f}", "1.00x"]]
    for k, x in b.ensembles:
        g, w = percentiles(x.glimpse)[0], percentiles(x.worst)[1]
        rows.append(
            [str(k), f"{g * 1e3:.3f}", f"{g / g1:.2f}x", f"{w * 1e3:.2f}", f"{w / w1:.2f}x"]
        )
    header = ["members", "per glimpse p50 ms", "vs alone", "worst-case part p99 ms", "vs alone"]
    return (
        "Verdict ensembles (`export --ensemble`, one graph; ORT fp32 at"
        f" {single.threads} thread(s); the members are the run with its weights jittered,"
        " since identical members would be merged by ONNX Runtime's graph optimiser): the"
        " lead's moves, every member's verdict head on each step.\n\n" + table(header, rows) + "\n"
    )


def glimpse_rows(b: InferenceBenchmark) -> tuple[list[list], dict[str, float]]:
    """The per-glimpse table's rows, and ORT fp32's speed-up over torch eager per mode."""
    ms = 1e3
    torch_p50 = {x.mode: percentiles(x.glimpse)[0] for x in b.backends if x.name == "torch eager"}
    rows, speedups = [], {}
    for x in b.backends:
        p50, p99, mean = percentiles(x.glimpse)
        base = torch_p50[x.mode]
        if x.name == "ORT fp32":
            speedups[x.mode] = base / p50
        rows.append(
            [
                x.name,
                x.threads,
                f"{p50 * ms:.3f}",
                f"{p99 * ms:.3f}",
                f"{mean * ms:.3f}",
                f"{base / p50:.2f}x",
                f"{len(x.glimpse):,}",
            ]
        )
    return rows, speedups


def part_row(x: Backend) -> list:
    """One backend's row of the per-part table."""
    ms = 1e3
    q50, q99, _ = percentiles(x.part)
    w50, w99, _ = percentiles(x.worst)
    return [
        x.name,
        x.threads,
        f"{q50 * ms:.2f}",
        f"{q99 * ms:.2f}",
        f"{np.mean(x.part_steps):.1f}",
        f"{w50 * ms:.2f}",
        f"{w99 * ms:.2f}",
        f"{len(x.part):,} / {len(x.worst):,}",
    ]


def report(b: InferenceBenchmark) -> tuple[str, bool]:
    """The markdown body and whether every goal is met."""
    ms = 1e3
    rows, speedups = glimpse_rows(b)
    part_rows = [part_row(x) for x in b.backends]
    ok_speed = all(s >= GOAL_SPEEDUP for s in speedups.values())
    p99_worst = max(percentiles(x.worst)[1] for x in b.backends if x.name != "torch eager")
    ok_p99 = p99_worst * ms < GOAL_P99_MS
    a = b.agreement

    def verdict(ok: bool) -> str:
        return "meets" if ok else "**MISSES**"

    bc = (
        f", after TrainConfig's behaviour cloning of {b.bc_samples:,} scripted-teacher steps"
        if b.bc_samples
        else ""
    )
    speed_txt = ", ".join(f"{s:.2f}x at {t} thread(s)" for t, s in speedups.items())
    torch_p99 = max(percentiles(x.worst)[1] for x in b.backends if x.name == "torch eager")
    body = (
        "Per glimpse (one `forward` at batch 1):\n\n"
        + table(
            ["backend", "threads", "p50 ms", "p99 ms", "mean ms", "vs torch eager (p50)", "calls"],
            rows,
        )
        + f"\nPer part (a whole `run_episode` on a 512x512 frame, up to {b.n_parts} parts; "
        f"worst case: `stop` masked, all {b.budget} steps + the final verdict):\n\n"
        + table(
            [
                "backend",
                "threads",
                "p50 ms",
                "p99 ms",
                "steps/part",
                "worst-case p50 ms",
                "worst-case p99 ms",
                "parts",
            ],
            part_rows,
        )
        + "\nint8 against fp32 (ONNX Runtime, "
        f"{int(a['observations']):,} observations recorded from real episodes): action "
        f"agreement {100 * a['action_agreement']:.1f} %, verdict agreement "
        f"{100 * a['verdict_agreement']:.1f} %, max |diff| of class probabilities "
        f"{a['max_abs_diff_class_probs']:.2e}. fp32 against torch: max |diff| of action logits "
        f"{b.parity['max_abs_diff_action_logits']:.1e}, action agreement "
        f"{100 * b.parity['action_agreement']:.1f} %. Model files: fp32 "
        f"{b.onnx_bytes / 1024:,.0f} KiB, int8 {b.int8_bytes / 1024:,.0f} KiB.\n\n"
        f"The policy was trained with `train_run` for {b.trained_steps:,} PPO steps only{bc} "
        "(default TrainConfig network): its latency is that of a fully trained one, but its "
        "scan paths are not, "
        "so the worst-case columns (every part using the whole budget) bound what a trained "
        "policy costs. ONNX Runtime runs on the CPU execution provider. Each timing loop "
        "stops early after a time cap (the calls and parts columns say how many were "
        "timed), so that a backend stalling on a busy machine cannot hold the run.\n\n"
        + ensemble_text(b)
        + "Goals:\n\n"
        f"- ORT fp32 >= {GOAL_SPEEDUP:.0f}x faster than torch eager per glimpse (p50): "
        f"{speed_txt} ({verdict(ok_speed)}).\n"
        f"- p99 per-part decision < {GOAL_P99_MS:.0f} ms: worst case over the ONNX Runtime "
        f"backends {p99_worst * ms:.2f} ms ({verdict(ok_p99)}); torch eager (development "
        f"only) {torch_p99 * ms:.2f} ms.\n"
    )
    return body, ok_speed and ok_p99


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section; return 0 (1 when a goal is missed)."""
    args = parser(__doc__, quick="shorter training, fewer calls").parse_args(argv)
    import torch

    torch.manual_seed(0)
    if args.quick:
        kw = dict(train_steps=512, n_glimpse=2000, n_parts=200, n_obs=1000, max_s=5.0)
    else:
        kw = dict(train_steps=16384, n_glimpse=10000, n_parts=1000, n_obs=5000, max_s=40.0)
    with tempfile.TemporaryDirectory(prefix="inspector-bench-") as tmp:
        b = measure(Path(tmp), **kw)
    body, ok = report(b)
    body += f"\nLoad average at the end: {load_average():.1f}.\n"
    cmd = "python -m benchmarks.speed.inference" + (" --quick" if args.quick else "")
    print(body)
    if not args.no_write:
        print(f"wrote {write_section('inference', 'Inference latency', body, cmd, doc=args.doc)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
