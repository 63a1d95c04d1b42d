"""Train a student of a ``--members`` run's ensemble, record its figures, write the report."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from benchmarks.harness import RESULTS, parser, report_recorded, save_result, table
from benchmarks.studies import distill_student as study

STUDY = "distill_student"
FOLDER = RESULTS / STUDY
TITLE = "Distilling the ensemble into one student: the ways tried (magnetic tiles)"


def train(run: Path, name: str, steps: int, changes: dict) -> Path:
    """Train (or resume) the student ``run/name`` as ``train --members`` would, with
    the members' TrainConfig changed by ``changes``."""
    from inspector.train.config import TrainConfig
    from inspector.train.member_run import MemberSpec, run_member
    from inspector.train.members import student_spec, student_teacher

    lead = MemberSpec.read(run / "members" / "m0" / "member.json")
    base = {k: v for k, v in lead.config.items() if k in TrainConfig.__dataclass_fields__}
    cfg = TrainConfig(**{**base, "seed": lead.config["seed"], **changes})
    cfg.validate()
    members = sorted(p.parent for p in (run / "members").glob("m*/model.zip"))
    profile = run / "members" / "m0" / "profile.yaml"  # the run's copy (same sha256)
    profile = str(profile.resolve()) if profile.is_file() else lead.profile
    first, teacher = student_teacher(run, members, cfg)
    spec = student_spec(profile, lead.camera, lead.params, steps, run, cfg, len(members),
                        first, teacher)  # fmt: skip
    spec.out = str((run / name).resolve())
    spec.extra = {"changes": changes}
    path = Path(spec.out) / "member.json"
    if not path.is_file():
        spec.write()
    run_member(path)
    return Path(spec.out)


def prefix_choice(checks: list[dict], steps: int, metric: str, folder: Path) -> dict | None:
    """The val check a run stopped at ``steps`` keeps (as the run chooses: the later of
    equals, :func:`inspector.train.select.better_or_equal`), among those with a
    checkpoint in ``folder``; with its ``checkpoint`` path. None: no such check."""
    from inspector.train.select import better_or_equal

    best = None
    for c in checks:
        ckpt = folder / f"ckpt_{c['steps']:09d}.zip"
        if 0 < c["steps"] <= steps and ckpt.is_file():
            if best is None or better_or_equal(c, best, metric):
                best = {**c, "checkpoint": ckpt}
    return best


def prefix(student: Path, steps: int, out: Path) -> Path:
    """The model a run of ``student``'s recipe stopped at ``steps`` would keep, as a
    student folder ``out``: with a constant learning rate and rounds of the same size a
    shorter run is the first rounds of the longer one, so its kept model is the best of
    those rounds' val checks (chosen as the run chooses: :func:`better_or_equal`), taken
    from the longer run's checkpoints. Its search depth and ok bias are chosen again on
    the val frames (``calibrate``, as the run's end does). Nothing else is measured: the
    folder holds no cost.json (the shorter run's CPU was not spent)."""
    import shutil

    from inspector.cli import main as inspector_main
    from inspector.train.config import TrainConfig
    from inspector.train.select import val_params

    spec = json.loads((student / "member.json").read_text())
    cfg = TrainConfig.load(student / "config.yaml")  # the run's own config
    val, found = val_params(spec["camera"], spec["params"], cfg)
    if val is None:
        raise SystemExit(f"{student}: no val frames to choose its depth and ok bias on ({found})")
    metric = cfg.select_metric
    checks = json.loads((student / "select.json").read_text())["checks"]
    best = prefix_choice(checks, steps, metric, student / "checkpoints")
    if best is None:
        raise SystemExit(f"{student} has no checkpoint with a val check at <= {steps:,} steps")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(student, out, ignore=shutil.ignore_patterns("checkpoints", "tb", "cost.json"))
    for name in ("model.zip", "best.zip"):
        shutil.copyfile(best["checkpoint"], out / name)
    (out / "operating_point.json").unlink(missing_ok=True)
    shown = sum(c["steps"] <= steps for c in checks)
    why = (f"the first {steps:,} steps of {student.name} ({spec['timesteps']:,}): the best of"
           f" their {shown} val checks is at {best['steps']:,} steps ({metric}"
           f" {best[metric]:.3f})")  # fmt: skip
    extra = {**(spec.get("extra") or {}), "prefix": why, "prefix_of": student.name}
    spec = {**spec, "timesteps": steps, "out": str(out.resolve()), "extra": extra}
    (out / "member.json").write_text(json.dumps(spec, indent=1))
    params = [a for k, v in val.items() for a in ("--param", f"{k}={v}")]
    code = inspector_main(["calibrate", str(out), "--camera", spec["camera"], *params])
    if code:
        raise SystemExit(f"calibrate failed on {out} ({code})")
    return out


def figures(student: Path) -> dict:
    """The student's figures: biases chosen on val, figures on test at them."""
    from inspector.policy.operating_point import choose_bias, defect_auroc, rates_at
    from inspector.train.evaluate import part_probabilities
    from inspector.train.member_run import MemberSpec
    from inspector.train.select import eval_params, val_params
    from inspector.train.torch_policy import load_any_policy

    # the frames the product itself would choose on and judge on (a manifest's val and
    # test splits, a footage store's val and heldout ...), never the training ones
    run = MemberSpec.read(student / "member.json")
    cfg = run.train_config()
    val, why_val = val_params(run.camera, run.params, cfg)
    test, why_test = eval_params(run.camera, run.params, cfg)
    if val is None or test is None:
        raise SystemExit(f"{student}: {why_val if val is None else why_test}")
    pol = load_any_policy(student)
    om = pol.meta.outcome_matrix
    pv, yv = part_probabilities(pol, run.camera, val, None)
    pt, yt = part_probabilities(pol, run.camera, test, None)
    bal, at_val = choose_bias(pv, yv, om, "balanced")
    fa5, at_val5 = choose_bias(pv, yv, om, "max_false_alarms", 0.05)
    t_bal, t_fa5 = rates_at(pt, yt, om, bal), rates_at(pt, yt, om, fa5)
    report = json.loads((student / "report.json").read_text())
    spent = student / "cost.json"  # none: a prefix (its own CPU was not spent)
    cost = json.loads(spent.read_text()) if spent.is_file() else {}
    members_s = sum(
        json.loads(p.read_text()).get("cpu_s", 0.0)
        for p in (student.parent / "members").glob("m*/cost.json")
    )
    return {
        "val_parts": len(yv),
        "test_parts": len(yt),
        "val_auroc": defect_auroc(pv, yv != 0),
        "val_balanced": at_val["balanced_accuracy"],
        "val_recall_fa5": at_val5["defect_recall"],
        "bias_balanced": bal,
        "bias_fa5": fa5,
        "test_balanced": t_bal["balanced_accuracy"],
        "test_recall_balanced": t_bal["defect_recall"],
        "test_false_alarms_balanced": t_bal["false_alarm_rate"],
        "test_recall_fa5": t_fa5["defect_recall"],
        "test_false_alarms_fa5": t_fa5["false_alarm_rate"],
        "test_balanced_fa5": t_fa5["balanced_accuracy"],
        "test_auroc": defect_auroc(pt, yt != 0),
        "pixel_fraction": report.get("pixel_fraction"),
        "kept": run.extra.get("prefix") or (report.get("kept") or {}).get("why"),
        "cpu_min": cost["cpu_s"] / 60.0 if cost else None,
        "cpu_min_to_deployable": (members_s + cost["cpu_s"]) / 60.0 if cost else None,
        "phases_cpu_s": cost.get("phases", {}),
    }


def record(student: Path, label: str, note: str, command: str) -> dict:
    """Save a finished student's figures with what it was asked."""
    spec = json.loads((student / "member.json").read_text())
    cfg = spec["config"]
    config = {
        "label": label,
        "members_run": student.parent.name,
        "steps": spec["timesteps"],
        "distill": "supervised" if cfg.get("supervised_distill_steps") else "ppo",
        "starts_from": Path(spec["init_from"]).name if spec.get("init_from") else "scratch",
        "changes": (spec.get("extra") or {}).get("changes", {}),
    }
    if (spec.get("extra") or {}).get("prefix_of"):
        config["prefix_of"] = spec["extra"]["prefix_of"]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = {"note": note, "command": command, "recorded": stamp, **figures(student)}
    return save_result(FOLDER / f"{label}.json", STUDY, config, result)


def _f(v: object, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


HEADS = ["attempt", "distillation", "starts from", "steps", "val AUROC", "val balanced",
         "test balanced (val's balanced point)",
         "test recall / false alarms / balanced at <= 5 % FA on val",
         "test AUROC", "pixel fraction", "CPU-min (distillation run)",
         "CPU-min to deployable"]  # fmt: skip


def report(results: list[dict]) -> str:
    """The section: one row per attempt (oldest first), then each attempt's command and note."""
    results = sorted(results, key=lambda d: d.get("recorded", ""))
    rows, notes = [], []
    for d in results:
        c = d["benchmark"]["config"]
        changes = ", ".join(f"{k}={v}" for k, v in c["changes"].items()) or "as recorded"
        if c.get("prefix_of"):
            changes += f"; the first {c['steps']:,} steps of {c['prefix_of']}"
        rows.append([
            c["label"], f"{c['distill']} ({changes})", c.get("starts_from", "m0"),
            f"{c['steps']:,}", _f(d["val_auroc"]),
            _f(d["val_balanced"]), _f(d["test_balanced"]),
            f"{_f(d['test_recall_fa5'])} / {_f(d['test_false_alarms_fa5'])}"
            f" / {_f(d.get('test_balanced_fa5'))}",
            _f(d["test_auroc"]), _f(d["pixel_fraction"]), _f(d["cpu_min"], 1),
            _f(d["cpu_min_to_deployable"], 1),
        ])  # fmt: skip
        notes.append(f"- {c['label']}: `{d['command']}`. {d.get('note', '')}".rstrip())
    return (
        "Students of the ensembles of members_cost runs, one per way of distilling them:"
        " the rows down to supervised_24k_t2 of tiles_m4_150k_s0 (4 members of 150,000"
        " steps, seed 0), the rest of the run each command names. Val split"
        " (130 tiles) for every choice (the kept checkpoint, both ok biases); test split"
        " (263 tiles) only for the figures. CPU minutes: user+system of the student's"
        " run on a 2-core machine shared with other jobs (one torch thread); none for a"
        " prefix (`prefix`: the model a shorter run of the same rounds keeps, taken from a"
        " longer run's checkpoints, whose CPU was not spent on its own).\n\n"
        + table(HEADS, rows)
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = parser(study.__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    tr = sub.add_parser("train", help="train (or resume) a student of RUN's ensemble")
    tr.add_argument("run", type=Path, help="a finished train --members run")
    tr.add_argument("--name", required=True, help="the student's folder inside RUN")
    tr.add_argument("--steps", type=int, required=True, help="its environment steps")
    tr.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a TrainConfig change (YAML value)")  # fmt: skip
    pre = sub.add_parser("prefix", help="the model a shorter run would keep, from a longer run")
    pre.add_argument("student", type=Path, help="a finished student folder (with checkpoints)")
    pre.add_argument("--steps", type=int, required=True, help="the shorter run's steps")
    pre.add_argument("--out", type=Path, required=True, help="where the prefix student goes")
    rec = sub.add_parser("record", help="save a finished student's figures, rewrite the section")
    rec.add_argument("student", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--note", default="")
    rec.add_argument("--command", default="", help="the command that trained it")
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "train":
        from inspector.threads import configure

        # as a member process does: INSPECTOR_THREADS, else OMP_NUM_THREADS, else the cores
        print(f"threads: {configure().describe()}")
        changes = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}
        t0 = time.time()
        out = train(args.run, args.name, args.steps, changes)
        print(f"trained {out} in {time.time() - t0:.0f} s wall")
        return 0
    if args.verb == "prefix":
        print(f"wrote {prefix(args.student, args.steps, args.out)}")
        return 0
    if args.verb == "record":
        record(args.student, args.label, args.note, args.command)
    return report_recorded(FOLDER, STUDY, TITLE, report, args)
