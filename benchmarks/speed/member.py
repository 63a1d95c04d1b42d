"""Where a footage member's training time goes, and the network's share of it: this code
against the network as it was before the channels-last change, in the same run.

PPO is 95 % of a ``train --members`` member's CPU (docs/benchmarks.md, members_cost), and
most of PPO is the glimpse CNN's forward and backward passes. This trains one short
member of the footage preset on the magnetic tiles' train split (``train`` in this
process, one torch thread, nothing else changed) twice per repeat, alternating:

* **this code**: the glimpse CNN's later layers in the channels-last layout with in-place
  ReLUs, the two-pass standardisation, the overview's evidence pass in the memory's call
  (``inspector.train.network``);
* **baseline: the network before 2026-12-07** (commit 6448b29): NCHW layout, torch's
  one-pass ``std``, a CNN call of its own for the overview's evidence. Re-created here by
  patching those three functions back (:func:`baseline_network`); the weights, the
  arithmetic and every other phase are the same code.

Each phase's CPU seconds come from the run's own ``phases.json`` (what members_cost
reads); the figure is this code's CPU per phase as a ratio of the baseline's.

Run from the repository root, on a quiet machine::

    python -m benchmarks.speed.member [--quick]

Writes the ``member_time`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.harness import ROOT, load_average, magnetic_tile_root, parser, table, write_section

PROFILE = str(ROOT / "reward_profiles" / "magnetic_tile.yaml")


def _old_standardise(x, eps: float = 1.0):
    mean = x.mean(dim=(-2, -1), keepdim=True)
    std = x.std(dim=(-2, -1), keepdim=True, unbiased=False)
    return (x - mean) / (std + eps)


def _old_cnn_forward(self, x):
    import torch
    import torch.nn.functional as F
    from torch import nn

    h = x
    for layer in self.net:  # NCHW throughout, ReLUs not in place
        h = F.relu(h) if isinstance(layer, nn.ReLU) else layer(h)
    return torch.cat([h.amax(dim=(-2, -1)), h.mean(dim=(-2, -1))], dim=1)


def _old_memory_features(self, g, filled, extra=None):
    from inspector.train import network

    b, m, h, w = g.shape
    flat = g.reshape(b * m, 1, h, w)
    need = filled.reshape(b, m) > 0
    need[:, 0] = True
    idx = need.reshape(-1).nonzero(as_tuple=True)[0]
    # The overview's evidence in a call of its own, as before.
    ov = None if extra is None else self.glimpse_cnn(extra)
    if len(idx) == b * m:
        return self.glimpse_cnn(network.standardise(flat)).reshape(b, m, -1), ov
    part = self.glimpse_cnn(network.standardise(flat[idx]))
    out = part.new_zeros(b * m, part.shape[1]).index_copy(0, idx, part)
    return out.reshape(b, m, -1), ov


@contextlib.contextmanager
def baseline_network() -> Iterator[None]:
    """The network's three functions as they were at 6448b29, for the duration."""
    from inspector.train import network

    saved = (
        network.standardise,
        network.GlimpseCNN.forward,
        network.InspectorExtractor._memory_features,
    )
    network.standardise = _old_standardise
    network.GlimpseCNN.forward = _old_cnn_forward
    network.InspectorExtractor._memory_features = _old_memory_features
    try:
        yield
    finally:
        (
            network.standardise,
            network.GlimpseCNN.forward,
            network.InspectorExtractor._memory_features,
        ) = saved


def train_argv(data: Path, out: Path, timesteps: int, seed: int) -> list[str]:
    """``train`` of one footage-preset member on the train split, one thread."""
    return [
        "train", "--profile", PROFILE, "--camera", "folder",
        "--param", f"path={data}", "--param", "manifest=splits.csv", "--param", "split=train",
        "--timesteps", str(timesteps), "--seed", str(seed), "--threads", "1",
        "--out", str(out),
    ]  # fmt: skip


def one_member(data: Path, timesteps: int, seed: int, baseline: bool) -> dict[str, float]:
    """CPU seconds by phase of one short member (``phases.json``)."""
    from inspector.cli import main

    with tempfile.TemporaryDirectory(prefix="member_time_") as tmp:
        out = Path(tmp) / "run"
        argv = train_argv(data, out, timesteps, seed)
        with baseline_network() if baseline else contextlib.nullcontext():
            rc = main(argv)
        if rc != 0:
            raise SystemExit(f"train exited with {rc}: {' '.join(argv)}")
        return json.loads((out / "phases.json").read_text())


def measure(data: Path, timesteps: int, repeats: int, seed: int) -> dict[str, list[dict]]:
    """Phases of each variant, ``repeats`` times, alternating (baseline first on even
    repeats)."""
    runs: dict[str, list[dict]] = {"current": [], "baseline": []}
    for r in range(repeats):
        order = ("baseline", "current") if r % 2 == 0 else ("current", "baseline")
        for name in order:
            runs[name].append(one_member(data, timesteps, seed, name == "baseline"))
            print(f"repeat {r + 1}/{repeats} {name}: {runs[name][-1]}", flush=True)
    return runs


def report(runs: dict[str, list[dict]], timesteps: int, seed: int) -> str:
    """The markdown body: each phase's median CPU seconds and the ratio."""
    med = statistics.median

    def phase(name: str, p: str) -> float:
        return med(float(r.get(p, 0.0)) for r in runs[name])

    from inspector.train.phases import PHASES

    counted = [p for p in PHASES if any(p in r for rs in runs.values() for r in rs)]
    rows = []
    for p in (*counted, "all"):
        if p == "all":
            cur = sum(phase("current", q) for q in counted)
            base = sum(phase("baseline", q) for q in counted)
        else:
            cur, base = phase("current", p), phase("baseline", p)
        ratio = f"{cur / base:.2f}x" if base > 0 else "-"
        rows.append([p, f"{base:.1f}", f"{cur:.1f}", ratio])
    ppo_b, ppo_c = phase("baseline", "ppo"), phase("current", "ppo")
    n = len(runs["current"])
    return (
        table(["phase", "baseline: network of 6448b29 (CPU s)", "this code (CPU s)", "ratio"], rows)
        + f"\nOne member of the footage preset (reward_profiles/magnetic_tile.yaml, folder "
        f"camera on the magnetic tiles' train split, `--timesteps {timesteps:,} --seed {seed} "
        f"--threads 1`), in this process; median of {n} run(s) per variant, alternating. "
        f"PPO: {timesteps / ppo_b:,.0f} steps per CPU second before, {timesteps / ppo_c:,.0f} "
        f"now (**{ppo_c / ppo_b:.2f}x** the CPU). The baseline is the same code with the "
        "network's standardisation, glimpse-CNN forward and memory pass patched back to "
        "6448b29's (benchmarks/speed/member.py, `baseline_network`).\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section."""
    ap = parser(__doc__, quick="4,096 steps, one run per variant")
    ap.add_argument("--seed", type=int, default=3, help="training seed (default 3)")
    args = ap.parse_args(argv)
    data = magnetic_tile_root()
    if data is None:
        print("magnetic tiles not found (INSPECTOR_DATA or ../shared/datasets)", file=sys.stderr)
        return 2
    load = load_average()
    timesteps, repeats = (4096, 1) if args.quick else (16384, 2)
    runs = measure(data, timesteps, repeats, args.seed)
    body = report(runs, timesteps, args.seed) + f"\nLoad average at the start: {load:.1f}.\n"
    cmd = "python -m benchmarks.speed.member" + (" --quick" if args.quick else "")
    if args.seed != 3:
        cmd += f" --seed {args.seed}"
    print(body)
    if not args.no_write:
        title = "A member's training time: the network's share, this code against 6448b29"
        print(f"wrote {write_section('member_time', title, body, cmd, doc=args.doc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
