"""Does the learned search earn its keep? Controls, levers and reward arms (issue #27).

    python -m benchmarks.studies.search_controls --quick        # < 10 min, 1 seed
    python -m benchmarks.studies.search_controls --seeds 3      # what the report shows
    python -m benchmarks.studies.search_controls --seeds 5 --sections arms --only-seeds 3,4

Sections (``--sections``, default all, trained and evaluated in this order):

* ``controls``: the full stack (arm ``exp``) per seed; its trained perception and verdict
  heads are then driven by fixed scans (raster, random, overview alone, exhaustive
  tiling) and by the learned agent (:mod:`.drivers`, :mod:`.analysis`).
* ``levers``: the same profile at the step costs of :data:`.training.STEP_COSTS` (seeds of
  ``--lever-seeds``), and one trained agent's verdicts under false-alarm costs from -0.2
  to -1.6 with no retraining (:mod:`.levers`).
* ``arms``: the reward arms of :data:`.training.ARMS` on top of the same supervised stack.
* ``tiles`` (only when named): the controls of ``controls`` on the magnetic-tile footage,
  driving models that ``train --preset footage --members N`` trained (``--tiles-run``,
  read only; :mod:`.tiles`). Each model's evaluation is saved as it finishes, under
  benchmarks/results/search_controls/MODE/tiles/; ``--quick`` drives the student alone.

    python -m benchmarks.studies.search_controls --sections tiles --tiles-run RUN

Each run is saved as it finishes (models under runs/search_controls/, records and
curves under benchmarks/results/search_controls/); a rerun skips what exists, so a
stopped run resumes at the next missing piece. One training process at a time,
one torch thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from benchmarks import harness
from benchmarks.studies.search_controls import training
from benchmarks.studies.search_controls.tiles import evaluate_tiles, tiles_options

SECTIONS = ("controls", "levers", "arms", "tiles")
#: What runs without ``--sections``: the footage section needs a trained footage run.
DEFAULT_SECTIONS = ("controls", "levers", "arms")
RESULTS = harness.RESULTS / training.STUDY
MODELS = harness.RUNS / training.STUDY
#: The training records' folder under a mode's results (not ``runs``: .gitignore keeps
#: every folder of that name out of git; the first records went there and move once).
TRAINED = "trained"


def run_sizes(args: argparse.Namespace) -> dict:
    """The run sizes of a mode (``--quick`` or full); explicit flags override them."""
    quick = args.quick
    s = {
        "mode": "quick" if quick else "full",
        "seeds": 1 if quick else 3,
        "budget": 4096 if quick else 32768,
        "perception": 1000 if quick else 8000,
        "bc_samples": 1024 if quick else 8192,
        "eval_every": 2048 if quick else 4096,
        "eval_parts": 40 if quick else 150,
        "parts": 60 if quick else 300,
    }
    for key in ("seeds", "budget", "perception", "bc_samples", "eval_parts", "parts"):
        if getattr(args, key) is not None:
            s[key] = getattr(args, key)
    return s


def settings(args: argparse.Namespace) -> dict:
    """The run sizes of a mode and the study's plan; explicit flags override them."""
    s = run_sizes(args)
    s["lever_seeds"] = 1
    s["step_costs"] = (0.0, 0.3) if args.quick else training.STEP_COSTS
    s["arms"] = ("outcome", "exp") if args.quick else tuple(training.ARMS)
    if args.lever_seeds is not None:
        s["lever_seeds"] = args.lever_seeds
    if args.arms:
        s["arms"] = tuple(args.arms.split(","))
    if args.step_costs:
        s["step_costs"] = tuple(float(v) for v in args.step_costs.split(","))
    return s


def plan(s: dict, sections: tuple[str, ...]) -> list[tuple[str, int, float | None]]:
    """The runs to train, in order: (arm, seed, step cost or None for the profile's)."""
    runs: list[tuple[str, int, float | None]] = []
    if "controls" in sections:
        runs += [("exp", seed, None) for seed in range(s["seeds"])]
    if "levers" in sections:
        for seed in range(s["lever_seeds"]):
            runs += [("exp", seed, sc) for sc in s["step_costs"] if sc != 0.01]
            if 0.01 in s["step_costs"]:
                runs.append(("exp", seed, None))
    if "arms" in sections:
        for seed in range(s["seeds"]):
            runs += [(arm, seed, None) for arm in s["arms"]]
    seen, out = set(), []
    for r in runs:
        if r not in seen:
            seen.add(r)
            out.append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, quick="1 seed, small runs (< 10 min)", full_doc=True)
    ap.add_argument(
        "--sections",
        default=",".join(DEFAULT_SECTIONS),
        help=f"comma-separated, of {','.join(SECTIONS)} (default {','.join(DEFAULT_SECTIONS)})",
    )
    ap.add_argument("--seeds", type=int, help="seeds per arm (default 3, quick 1)")
    ap.add_argument("--only-seeds", help="comma-separated seeds to train in this process")
    ap.add_argument("--lever-seeds", type=int, help="seeds of the step-cost runs (default 1)")
    ap.add_argument(
        "--arms", help=f"arms of the arms section (default all: {','.join(training.ARMS)})"
    )
    ap.add_argument("--step-costs", help="step costs of the levers section (comma-separated)")
    ap.add_argument("--budget", type=int, help="env steps per run (default 32768, quick 4096)")
    ap.add_argument("--perception", type=int, help="perception crops (default 8000)")
    ap.add_argument("--bc-samples", type=int, help="cloned teacher steps (default 8192)")
    ap.add_argument("--eval-parts", type=int, help="parts of the training curve (default 150)")
    ap.add_argument("--parts", type=int, help="val and test parts of the controls (default 300)")
    tiles_options(ap)
    ap.add_argument("--train-only", action="store_true", help="train, evaluate nothing")
    ap.add_argument("--report-only", action="store_true", help="train nothing")
    ap.add_argument(
        "--results",
        type=Path,
        help="results folder (default benchmarks/results/search_controls; its models/ then"
        " holds the models, else runs/search_controls/)",
    )
    args = ap.parse_args(argv)
    sections = tuple(x for x in args.sections.split(",") if x)
    bad = sorted(set(sections) - set(SECTIONS))
    if bad or not sections:
        ap.error(f"--sections takes {','.join(SECTIONS)}, got {args.sections!r}")
    s = settings(args)
    unknown = sorted(set(s["arms"]) - set(training.ARMS))
    if unknown:
        ap.error(f"unknown arms {unknown}; arms: {','.join(training.ARMS)}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = (args.results or RESULTS) / s["mode"]
    models = (args.results / "models" if args.results else MODELS) / s["mode"]
    legacy = out / "runs"
    for p in sorted(legacy.glob("*.json")) if legacy.is_dir() else []:
        (out / TRAINED).mkdir(parents=True, exist_ok=True)
        p.replace(out / TRAINED / p.name)
    only = {int(v) for v in args.only_seeds.split(",")} if args.only_seeds else None
    if not args.report_only:
        for arm, seed, sc in plan(s, sections):
            if only is not None and seed not in only:
                continue
            name = training.run_name(arm, seed, s["budget"], sc)
            if (out / TRAINED / f"{name}.json").is_file() and (models / f"{name}.zip").is_file():
                continue
            print(f"training {name}", flush=True)
            rec = training.train_one(
                arm,
                seed,
                s["budget"],
                models,
                perception=s["perception"],
                bc_samples=s["bc_samples"],
                eval_every=s["eval_every"],
                eval_parts=s["eval_parts"],
                step_cost=sc,
            )
            (out / TRAINED).mkdir(parents=True, exist_ok=True)
            training.save_result(out / TRAINED / f"{name}.json", training.run_config(rec), rec)
            last = rec["curve"][-1]
            print(
                f"  {name}: accuracy {last['accuracy']:.3f}, glimpses {last['mean_glimpses']:.1f},"
                f" {rec['wall_s']:.0f} s",
                flush=True,
            )
    if args.train_only:
        return 0
    evaluate(s, sections, out, models)
    if "tiles" in sections and not args.report_only:
        status = evaluate_tiles(args, s, out)
        if status:
            return status
    return write_report(s, sections, out, args, argv)


def evaluate(s: dict, sections: tuple[str, ...], out: Path, models: Path) -> None:
    """Drive every trained run of the plan that has no saved evaluation yet.

    The full stack's runs of the controls section get every driver and the
    outcome-values lever; the others the learned agent alone. Val parts choose the
    operating points, test parts are reported (:data:`training.VAL_SEED_BASE`,
    :data:`training.TEST_SEED_BASE` plus the run's seed).
    """
    from benchmarks.studies.search_controls import analysis, drivers, levers

    records = _load(out / TRAINED, s["budget"])
    for arm, seed, sc in plan(s, sections):
        name = training.run_name(arm, seed, s["budget"], sc)
        path = out / "evals" / f"{name}.json"
        if name not in records:  # not trained (or stopped before its record was saved)
            continue
        fixed = "controls" in sections and arm == "exp" and sc is None and seed < s["seeds"]
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved["fixed"] or not fixed:
                continue
        policy = training.load_agent(models, arm, seed, s["budget"], sc)
        if policy is None:
            continue
        print(f"evaluating {name} ({'every driver' if fixed else 'the agent'})", flush=True)
        parts = {}
        for split, base in (("val", training.VAL_SEED_BASE), ("test", training.TEST_SEED_BASE)):
            frames = drivers.synthetic_frames({**training.CAMERA, "seed": base + seed}, s["parts"])
            parts[split] = drivers.drive(policy, frames, seed=base + seed, fixed=fixed)
        rows = analysis.curves(parts["val"], parts["test"], policy.meta.outcome_matrix)
        ev = {"name": name, "parts": s["parts"], "fixed": fixed, "rows": rows}
        if fixed:
            test = parts["test"]
            prof = training.profile_for(arm, sc)
            ev["outcome_values"] = levers.outcome_value_rows(
                prof, test["agent"]["probs"][:, -1], test["labels"]
            )
        (out / "evals").mkdir(parents=True, exist_ok=True)
        config = {**training.run_config(records[name]), "kind": "eval", "parts": s["parts"]}
        training.save_result(path, {**config, "fixed": fixed}, ev)


def _load(folder: Path, budget: int) -> dict[str, dict]:
    """The saved results of ``budget`` in ``folder``, by run name; a training record saved
    before results carried their configuration gets it now (written back once)."""
    out = {}
    for p in sorted(folder.glob(f"*_{budget}.json")):
        data = json.loads(p.read_text())
        if "benchmark" not in data and "curve" in data:
            data = training.save_result(p, training.run_config(data), data)
        out[p.stem] = data
    return out


def reproduce(argv: list[str]) -> str:
    """The command that reproduces the figures: this one without the options that only
    say where things go or what to skip (no machine path enters the report)."""
    drop_with_value = {"--doc", "--results", "--tiles-run", "--data"}
    drop = {"--report-only", "--train-only", "--no-write"}
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in drop_with_value:
            skip = True
        elif a not in drop and a.split("=")[0] not in drop_with_value:
            kept.append(a)
    return " ".join(["python -m benchmarks.studies.search_controls", *kept])


def write_report(s: dict, sections, out: Path, args, argv) -> int:
    """The report from every saved run and evaluation of this mode and budget."""
    from benchmarks.studies.search_controls import analysis, plot, report, tiles, tiles_report

    records = _load(out / TRAINED, s["budget"])
    evals = _load(out / "evals", s["budget"])
    footage = tiles.load_evals(out)
    if not records and not footage:
        print("no saved runs to report", file=sys.stderr)
        return 1
    # A quick run never replaces the published section (unless --doc names a report).
    write = not args.no_write and (s["mode"] == "full" or args.doc != harness.DOC)
    # --no-write writes nothing (the results tree is in git): plots go to a scratch folder.
    scratch = tempfile.TemporaryDirectory(prefix="search_controls_") if args.no_write else None
    png_dir = Path(scratch.name) if scratch else args.doc.parent if write else out
    parts = report.runs_note(records) if records else []
    controls = {n: e for n, e in evals.items() if e["fixed"]}
    if controls:
        mean = analysis.mean_rows([e["rows"] for e in controls.values()])
        png = png_dir / "search_controls_quadrants.png"
        plot.plot_controls(mean, png, "Quadrants task: one trained model's heads under each driver")
        parts += report.controls_section(controls, mean, png, s)
    parts += tiles_report.section(footage, png_dir)
    levers_runs = {
        n: e
        for n, e in evals.items()
        if n in records and records[n]["arm"] == "exp" and records[n]["seed"] < s["lever_seeds"]
    }
    parts += report.arms_section(records, evals, s)
    if any("_sc" in n for n in levers_runs):
        parts += report.levers_section(levers_runs, records, controls)
    body = "\n".join(parts) + "\n"
    command = reproduce(argv if argv is not None else sys.argv[1:])
    title = "Does the learned search earn its keep? (issue #27)"
    # The footage section alone changes no other figure: the section keeps its command and
    # Measured line (1b carries its own).
    alone = tuple(sections) == ("tiles",)
    if alone:
        command = tiles_report.current_command(args.doc) or command
    if write:
        # Runs accumulate over sessions: "Measured" is when this report was put together.
        harness.write_section(
            "search_controls", title, body, command, doc=args.doc, keep_measured=alone
        )
    elif scratch is None:  # kept beside the runs instead
        (out / "report.md").write_text(body)
    else:
        scratch.cleanup()
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
