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


def figures(student: Path) -> dict:
    """The student's figures: biases chosen on val, figures on test at them."""
    from inspector.policy.operating_point import choose_bias, defect_auroc, rates_at
    from inspector.train.evaluate import part_probabilities
    from inspector.train.torch_policy import load_any_policy

    spec = json.loads((student / "member.json").read_text())
    params = dict(spec["params"])
    pol = load_any_policy(student)
    om = pol.meta.outcome_matrix
    pv, yv = part_probabilities(pol, spec["camera"], {**params, "split": "val"}, None)
    pt, yt = part_probabilities(pol, spec["camera"], {**params, "split": "test"}, None)
    bal, at_val = choose_bias(pv, yv, om, "balanced")
    fa5, at_val5 = choose_bias(pv, yv, om, "max_false_alarms", 0.05)
    t_bal, t_fa5 = rates_at(pt, yt, om, bal), rates_at(pt, yt, om, fa5)
    report = json.loads((student / "report.json").read_text())
    cost = json.loads((student / "cost.json").read_text())
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
        "test_auroc": defect_auroc(pt, yt != 0),
        "pixel_fraction": report.get("pixel_fraction"),
        "kept": (report.get("kept") or {}).get("why"),
        "cpu_min": cost.get("cpu_s", 0.0) / 60.0,
        "cpu_min_to_deployable": (members_s + cost.get("cpu_s", 0.0)) / 60.0,
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
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = {"note": note, "command": command, "recorded": stamp, **figures(student)}
    return save_result(FOLDER / f"{label}.json", STUDY, config, result)


def _f(v: object, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


HEADS = ["attempt", "distillation", "starts from", "steps", "val AUROC", "val balanced",
         "test balanced (val's balanced point)", "test recall / false alarms at <= 5 % FA on val",
         "test AUROC", "pixel fraction", "CPU-min (distillation run)",
         "CPU-min to deployable"]  # fmt: skip


def report(results: list[dict]) -> str:
    """The section: one row per attempt (oldest first), then each attempt's command and note."""
    results = sorted(results, key=lambda d: d.get("recorded", ""))
    rows, notes = [], []
    for d in results:
        c = d["benchmark"]["config"]
        changes = ", ".join(f"{k}={v}" for k, v in c["changes"].items()) or "as recorded"
        rows.append([
            c["label"], f"{c['distill']} ({changes})", c.get("starts_from", "m0"),
            f"{c['steps']:,}", _f(d["val_auroc"]),
            _f(d["val_balanced"]), _f(d["test_balanced"]),
            f"{_f(d['test_recall_fa5'])} / {_f(d['test_false_alarms_fa5'])}",
            _f(d["test_auroc"]), _f(d["pixel_fraction"]), _f(d["cpu_min"], 1),
            _f(d["cpu_min_to_deployable"], 1),
        ])  # fmt: skip
        notes.append(f"- {c['label']}: `{d['command']}`. {d.get('note', '')}".rstrip())
    return (
        "Students of the same members (the members_cost run tiles_m4_150k_s0: 4 members"
        " of 150,000 steps, seed 0), one per way of distilling their ensemble. Val split"
        " (130 tiles) for every choice (the kept checkpoint, both ok biases); test split"
        " (263 tiles) only for the figures. CPU minutes: user+system of the student's"
        " run on a 2-core machine shared with other jobs (one torch thread).\n\n"
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
    rec = sub.add_parser("record", help="save a finished student's figures, rewrite the section")
    rec.add_argument("student", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--note", default="")
    rec.add_argument("--command", default="", help="the command that trained it")
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "train":
        changes = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.set)}
        t0 = time.time()
        out = train(args.run, args.name, args.steps, changes)
        print(f"trained {out} in {time.time() - t0:.0f} s wall")
        return 0
    if args.verb == "record":
        record(args.student, args.label, args.note, args.command)
    return report_recorded(FOLDER, STUDY, TITLE, report, args)
