"""A searcher that can jump (issue #27, section 4): ``scan.actions: tiles``, trained and
driven by the same controls.

    python -m benchmarks.studies.search_controls.jump --seeds 3
    python -m benchmarks.studies.search_controls.jump --quick       # < 10 min, 1 seed

The controls showed that the move agent only ties a raster scan on the quadrants task and
that a tiling with a confidence stop reaches its recall in half its glimpses: its
half-viewport moves cannot jump. Arm ``jump`` is arm ``exp``'s recipe (lcd_panel.yaml's
terms, exponential redistribution, perception pretraining, cloning, HybridPPO 0.7 / 0.2 /
0.1) with the product's tile action table: a jump to each native tile of a 2 x 2 grid
(the quadrants task's four 64-px tiles of a 128-px frame) and stop, cloning the product's
tile teacher (:class:`inspector.teacher.TileTeacher`). Arm ``jumpmv`` keeps the moves
beside the jumps (``moves+tiles``).

Supervised stack: where the controls' own pretraining of a seed is at hand (``exp``'s
``pretrained_s<seed>_<crops>_<cloned>.pt`` beside the models), the jump arm starts from it
(same perception; the stop and verdict rows of the action head carried over, the tile
rows fresh) and clones the tile teacher on top; otherwise it pretrains perception itself.
Either way the stack is kept as ``jump_pretrained_...pt`` for the seed's next run.

The trained model is then driven by the controls (:mod:`.drivers`: overview, raster,
random, exhaustive tiling, tiling with a confidence stop; no fixed walk, the model has no
moves) on the controls' val and test parts, and by itself, also with a stop on its
defect score (:func:`defect_stop`). Saved as it goes; a rerun resumes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from benchmarks.studies.search_controls import training

#: arm -> (the profile's ``scan.actions``, what it is)
JUMP_ARMS = {
    "jump": ("tiles", "jump to each native tile (2 x 2 grid) and stop, no moves"),
    "jumpmv": ("moves+tiles", "the moves and zooms, a jump to each native tile, and stop"),
}
#: The jump runs' records and evaluations: their own folder under the study's results
#: (``<mode>/jump/trained``, ``<mode>/jump/evals``), apart from the reward arms' records
#: that the study's report reads.
FOLDER = "jump"
#: tiles per side of the jump grid: the quadrants task's 128-px frame holds 2 x 2 native
#: 64-px viewports, the exhaustive tiling of the controls.
TILES = 2


def profile_for(arm: str):
    """Arm ``exp``'s profile with the arm's action table (``scan.actions``)."""
    if arm not in JUMP_ARMS:
        raise ValueError(f"unknown jump arm {arm!r}; arms: {', '.join(JUMP_ARMS)}")
    prof = training.profile_for("exp")
    scan = dataclasses.replace(prof.scan, actions=JUMP_ARMS[arm][0], tiles=TILES)
    return dataclasses.replace(prof, scan=scan)


def train_one(
    arm: str,
    seed: int,
    budget: int,
    out_dir: Path,
    *,
    perception: int = 8000,
    bc_samples: int = 8192,
    eval_every: int = 4096,
    eval_parts: int = 150,
    n_envs: int = 4,
) -> dict:
    """Train one jump arm with one seed; save ``out_dir/<run>.zip``; the record.

    :func:`.training.train_run` (as :func:`.training.train_one`: the crops and cloned
    steps count as env steps, so the PPO phase is as long as ``exp``'s), with the jump
    arm's supervised stack (:func:`_stack`).
    """

    def stack(model: Any, prof: Any, camera: dict, cfg: Any, folder: Path) -> str:
        return _stack(model, arm, prof, camera, cfg, folder)

    run = training.train_run(
        profile_for(arm), seed, budget, out_dir, training.run_name(arm, seed, budget), stack,
        perception=perception, bc_samples=bc_samples, eval_every=eval_every,
        eval_parts=eval_parts, n_envs=n_envs,
    )  # fmt: skip
    head = {"arm": arm, "seed": seed, "budget": budget, "step_cost": 0.01}
    return {**head, "actions": JUMP_ARMS[arm][0], "tiles": TILES, **run}


def _stack(model: Any, arm: str, prof: Any, camera: dict, cfg: Any, out_dir: Path) -> str:
    """Give ``model`` the jump arm's supervised stack; how it came (for the record).

    ``reused``: this arm's stack of the seed from disk. ``exp stack + tile cloning``: the
    controls' pretraining of the seed (moves), its action rows adapted, then the tile
    teacher cloned. ``fresh``: perception pretraining and cloning here.
    """
    import torch

    from inspector.train.runner import pretrain, pretrain_perception

    tag = f"s{cfg.seed}_{cfg.perception_samples}_{cfg.bc_samples}"
    own = out_dir / f"{arm}_pretrained_{tag}.pt"
    if own.is_file():
        model.policy.load_state_dict(torch.load(own, weights_only=True))
        return "reused"
    exp = out_dir / f"pretrained_{tag}.pt"
    how = "fresh"
    if exp.is_file():
        load_move_stack(model, torch.load(exp, weights_only=True), "moves" in prof.scan.actions)
        how = "exp stack + tile cloning"
    elif cfg.perception_samples:
        pretrain_perception(model, prof, "synthetic", camera, cfg)
    if cfg.bc_samples:
        pretrain(model, prof, "synthetic", camera, cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.policy.state_dict(), out_dir / f".{own.name}.tmp")
    (out_dir / f".{own.name}.tmp").replace(own)
    return how


def load_move_stack(model: Any, state: dict, has_moves: bool) -> list[str]:
    """Load a moves model's policy weights into ``model`` (another action table).

    Every tensor of the same shape is copied. The action head's rows are [moves...,
    stop, verdict classes...] in the source and [tiles..., stop, classes...] (or
    [moves..., tiles..., stop, classes...]) here: the stop and verdict rows are copied
    by position from the end, the moves by position from the start where the table has
    them (``has_moves``), the tile rows stay freshly initialised.

    :returns: the names of the tensors adapted rather than copied.
    """
    import torch

    from inspector.scan import MOVES

    dst = model.policy.state_dict()
    n_cls = int(model.action_space.nvec[-1])
    adapted = []
    with torch.no_grad():
        for k, v in dst.items():
            s = state.get(k)
            if s is None:
                continue
            if s.shape == v.shape:
                v.copy_(s)
            elif k.startswith("action_net.") and s.shape[1:] == v.shape[1:]:
                tail = 1 + n_cls  # stop and the verdict classes
                v[-tail:] = s[-tail:]
                if has_moves and s.shape[0] - tail == len(MOVES):
                    v[: len(MOVES)] = s[: len(MOVES)]
                adapted.append(k)
    model.policy.load_state_dict(dst)
    return adapted


def load_agent(out_dir: Path, arm: str, seed: int, budget: int):
    """A saved jump run's policy (the product's torch policy), or None."""
    from inspector.train.hybrid import HybridPPO

    path = out_dir / f"{training.run_name(arm, seed, budget)}.zip"
    if not path.is_file():
        return None
    model = HybridPPO.load(str(path), device="cpu")
    return training.agent_policy(model, profile_for(arm))


def settings(args: Any) -> dict:
    """The run sizes of a mode (the study's, :func:`.cli.run_sizes`) and the jump arms."""
    from benchmarks.studies.search_controls.cli import run_sizes

    s = run_sizes(args)
    s["arms"] = tuple(args.arms.split(",")) if args.arms else ("jump",)
    return s


def main(argv: list[str] | None = None) -> int:
    import os
    import sys

    from benchmarks import harness
    from benchmarks.studies.search_controls.cli import MODELS, RESULTS, TRAINED

    ap = harness.parser(__doc__, quick="1 seed, small runs (< 10 min)", full_doc=True)
    ap.add_argument("--seeds", type=int, help="seeds per arm (default 3, quick 1)")
    ap.add_argument("--only-seeds", help="comma-separated seeds to train in this process")
    ap.add_argument("--arms", help=f"jump arms (default jump; of {','.join(JUMP_ARMS)})")
    ap.add_argument("--budget", type=int, help="env steps per run (default 32768, quick 4096)")
    ap.add_argument("--perception", type=int, help="perception crops (default 8000)")
    ap.add_argument("--bc-samples", type=int, help="cloned teacher steps (default 8192)")
    ap.add_argument("--eval-parts", type=int, help="parts of the training curve (default 150)")
    ap.add_argument("--parts", type=int, help="val and test parts (default 300)")
    ap.add_argument("--train-only", action="store_true", help="train, evaluate nothing")
    ap.add_argument("--report-only", action="store_true", help="train nothing")
    ap.add_argument("--results", type=Path, help="results folder (default the study's)")
    args = ap.parse_args(argv)
    s = settings(args)
    bad = sorted(set(s["arms"]) - set(JUMP_ARMS))
    if bad:
        ap.error(f"unknown jump arms {bad}; arms: {','.join(JUMP_ARMS)}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = (args.results or RESULTS) / s["mode"] / FOLDER
    models = (args.results / "models" if args.results else MODELS) / s["mode"]
    only = {int(v) for v in args.only_seeds.split(",")} if args.only_seeds else None
    for arm in s["arms"] if not args.report_only else ():
        for seed in range(s["seeds"]):
            name = training.run_name(arm, seed, s["budget"])
            if only is not None and seed not in only:
                continue
            if (out / TRAINED / f"{name}.json").is_file() and (models / f"{name}.zip").is_file():
                continue
            print(f"training {name}", flush=True)
            keys = ("perception", "bc_samples", "eval_every", "eval_parts")
            rec = train_one(arm, seed, s["budget"], models, **{k: s[k] for k in keys})
            (out / TRAINED).mkdir(parents=True, exist_ok=True)
            cfg = {**training.run_config(rec), "actions": rec["actions"], "tiles": rec["tiles"]}
            training.save_result(out / TRAINED / f"{name}.json", cfg, rec)
            last = rec["curve"][-1]
            print(
                f"  {name}: accuracy {last['accuracy']:.3f}, glimpses {last['mean_glimpses']:.1f},"
                f" {rec['wall_s']:.0f} s ({rec['stack']})",
                flush=True,
            )
    if args.train_only:
        return 0
    from benchmarks.studies.search_controls import jump_report

    evals = jump_report.evaluate(s, out, models)
    if not evals:
        print("no trained jump runs to report", file=sys.stderr)
        return 1
    return jump_report.write(s, out, args, argv if argv is not None else sys.argv[1:], evals)


if __name__ == "__main__":
    import sys

    sys.exit(main())
