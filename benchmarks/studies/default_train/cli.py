"""Record finished default ``train`` / ``demo`` runs and write their section of the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.harness import RESULTS, parser, report_recorded, save_result, table
from benchmarks.studies import default_train as study

STUDY = "default_train"
FOLDER = RESULTS / STUDY
#: The goals of issue #26 for the synthetic task (the demo and the default command).
GOAL_ACCURACY = 0.90
GOAL_POINT_RECALL = 0.80


def record(
    run: Path,
    label: str,
    command: str,
    cpu_s: float | None = None,
    demo: Path | None = None,
    note: str = "",
) -> dict:
    """Save what a finished run's report says (with the command that made it).

    :param demo: the demo's summary.json (the station's figures on its own parts).
    """
    rep = json.loads((run / "report.json").read_text())
    recall = rep.get("per_class_recall", {})
    row = {
        "eval_parts": rep["episodes"],
        "accuracy": rep["accuracy"],
        "balanced_accuracy": rep["balanced_accuracy"],
        "point_recall": recall.get("point"),
        "line_recall": recall.get("line"),
        "defect_recall": rep.get("defect_recall"),
        "false_alarm_rate": rep.get("false_alarm_rate"),
        "mean_steps": rep.get("mean_steps"),
        "ok_bias": rep.get("ok_bias", 0.0),
        "kept": {k: rep.get("kept", {}).get(k) for k in ("checkpoint", "steps", "when", "why")},
        "kept_frames": (rep.get("kept") or {}).get("frames"),
        "checks": (rep.get("kept") or {}).get("checks"),
        "operating_point_frames": (rep.get("operating_point") or {}).get("frames"),
        "eval_frames": rep.get("eval_frames"),
    }
    if demo is not None:
        row["station"] = json.loads(demo.read_text())
    config = {"label": label, "command": command, "recipe": rep.get("recipe")}
    result = {"note": note, "cpu_s": cpu_s, "row": row}
    return save_result(FOLDER / f"{label}.json", STUDY, config, result)


def _f(v: object, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _goal(row: dict) -> str:
    acc, point = row.get("accuracy"), row.get("point_recall")
    if acc is None or point is None:
        return "-"
    missed = [
        name
        for name, ok in (
            (f"accuracy < {GOAL_ACCURACY}", acc >= GOAL_ACCURACY),
            (f"point recall < {GOAL_POINT_RECALL}", point >= GOAL_POINT_RECALL),
        )
        if not ok
    ]
    return "met" if not missed else "MISSED: " + ", ".join(missed)


HEADS = [
    "run",
    "command",
    "eval parts",
    "accuracy",
    "point recall",
    "line recall",
    "false alarms",
    "ok bias",
    "kept model",
    "CPU min",
    "goal (acc >= 0.90, point recall >= 0.80)",
]


def rows(results: list[dict]) -> list[list[str]]:
    out = []
    for d in results:
        cfg, r = d["benchmark"]["config"], d["row"]
        kept = r["kept"]
        kept_s = f"{kept.get('checkpoint')} ({_f(kept.get('steps'))} PPO steps)"
        cpu = d.get("cpu_s")
        out.append(
            [cfg["label"], f"`{cfg['command']}`", _f(r["eval_parts"]), _f(r["accuracy"]),
             _f(r["point_recall"]), _f(r["line_recall"]), _f(r["false_alarm_rate"]),
             f"{r['ok_bias']:+.2f}", kept_s, _f(cpu / 60 if cpu else None, 1), _goal(r)]
        )  # fmt: skip
    return out


def notes(results: list[dict]) -> list[str]:
    out = []
    for d in results:
        cfg, r = d["benchmark"]["config"], d["row"]
        frames = r.get("kept_frames") or {}
        line = (
            f"- {cfg['label']}: kept: {r['kept'].get('why')}. Val frames:"
            f" {frames.get('count')} parts ({frames.get('source')})."
        )
        st = r.get("station")
        if st:
            line += (
                f" Station (ONNX Runtime, its own parts): accuracy"
                f" {st.get('accuracy vs synthetic truth')}, point recall"
                f" {st.get('point recall (1-px points, invisible in the overview)')}, defect"
                f" recall {st.get('defect recall')}, false alarms {st.get('false-alarm rate')}."
            )
        if d.get("note"):
            line += f" {d['note']}"
        out.append(line)
    return out


def _same_command(command: str) -> str:
    """A command without its seed: the runs of one command at several seeds share it."""
    return re.sub(r"\s+--seed\s+\S+", "", command).strip()


def seeds_summary(results: list[dict]) -> list[str]:
    """One line per command run at several seeds: mean and range of its figures."""
    groups: dict[str, list[dict]] = {}
    for d in results:
        groups.setdefault(_same_command(d["benchmark"]["config"]["command"]), []).append(d)
    out = []
    for command, ds in groups.items():
        if len(ds) < 2:
            continue
        labels = ", ".join(d["benchmark"]["config"]["label"] for d in ds)
        parts = []
        for key, name in (
            ("accuracy", "accuracy"),
            ("point_recall", "point recall"),
            ("false_alarm_rate", "false alarms"),
        ):
            vals = [d["row"][key] for d in ds if d["row"].get(key) is not None]
            if vals:
                parts.append(
                    f"{name} mean {sum(vals) / len(vals):.3f} (range {min(vals):.3f}-"
                    f"{max(vals):.3f})"
                )
        cpu = [d["cpu_s"] / 60 for d in ds if d.get("cpu_s")]
        if cpu:
            parts.append(
                f"CPU min mean {sum(cpu) / len(cpu):.1f} (range {min(cpu):.1f}-{max(cpu):.1f})"
            )
        met = sum(_goal(d["row"]) == "met" for d in ds)
        out.append(
            f"- `{command}` over {len(ds)} seeds ({labels}): " + ", ".join(parts)
            + f"; goal met in {met} of {len(ds)}."
        )  # fmt: skip
    return out


def report(results: list[dict]) -> str:
    intro = (
        "Finished runs of the product's commands with their defaults (no config file), "
        "recorded from their report.json: evaluation parts of the training camera's fixed "
        "evaluation block, at the operating point `train` chose on its val frames. "
        "CPU min: user+system CPU of the whole command (`time`), on this shared 2-core "
        "machine.\n"
    )
    summary = seeds_summary(results)
    return "\n".join(
        [intro, table(HEADS, rows(results)), *summary, *([""] if summary else []),
         *notes(results)]
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = parser(study.__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record", help="save a finished run's figures and rewrite the section")
    rec.add_argument("run", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--command", required=True, help="the command that made the run")
    rec.add_argument("--cpu-s", type=float, help="user+system CPU seconds of the command")
    rec.add_argument("--demo", type=Path, help="the demo's summary.json")
    rec.add_argument("--note", default="")
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "record":
        record(args.run, args.label, args.command, args.cpu_s, args.demo, args.note)
    return report_recorded(
        FOLDER,
        STUDY,
        "The default train command and the demo (synthetic quadrants task)",
        report,
        args,
    )
