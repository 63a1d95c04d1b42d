"""Record finished ``train --members`` runs and write their section of the report."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from benchmarks.harness import (
    RESULTS,
    magnetic_tile_root,
    parser,
    report_recorded,
    save_result,
    table,
)
from benchmarks.studies import members_cost as study
from inspector.train.config import TrainConfig

STUDY = "members_cost"
FOLDER = RESULTS / STUDY


def config_changes(config: dict) -> dict:
    """The fields of a member's config that differ from TrainConfig's defaults."""
    base = dataclasses.asdict(TrainConfig())
    return {k: v for k, v in config.items() if k in base and base[k] != v and k != "seed"}


def _param(key: str, value: object) -> str:
    """A camera parameter as the command line gives it, without this machine's paths."""
    root = magnetic_tile_root()
    text = str(value)
    if root is not None and Path(text).resolve() == root.resolve():
        text = "../shared/datasets/magnetic-tile"
    elif Path(text).is_absolute():
        text = "FOOTAGE"
    return f"--param {key}={text}"


def record(run: Path, label: str, note: str = "") -> dict:
    """Save the rows of a finished ``--members`` run (with its configuration).

    :raises SystemExit: the run did not finish.
    """
    summary = json.loads((run / "members.json").read_text())
    if summary.get("status") != "done":
        raise SystemExit(f"{run}: the run has not finished (status {summary.get('status')})")
    spec = json.loads((run / "members" / "m0" / "member.json").read_text())
    asked = summary["asked"]
    params = " ".join(_param(k, v) for k, v in spec["params"].items())
    command = (
        f"python main.py train --profile reward_profiles/{Path(spec['profile']).name}"
        f" --camera {spec['camera']} {params} --config CONFIG --timesteps"
        f" {asked['timesteps']} --members {asked['members']} --distill-timesteps"
        f" {asked['distill_timesteps']} --seed {asked['seed']} --parallel 1"
    )
    rows = [{k: v for k, v in r.items() if k != "path"} for r in summary["rows"]]
    for row, r in zip(rows, summary["rows"]):  # a summary from before rows had the bias
        report = Path(r["path"]) / "report.json"
        if row.get("ok_bias") is None and report.is_file():
            row["ok_bias"] = json.loads(report.read_text()).get("ok_bias")
    costs = {}
    for r in summary["rows"]:
        path = Path(r["path"]) / "cost.json"
        if path.is_file():
            costs[r["name"]] = json.loads(path.read_text())
    config = {"label": label, **asked, "train_config": config_changes(spec["config"])}
    result = {"note": note, "command": command, "rows": rows, "costs": costs}
    return save_result(FOLDER / f"{label}.json", STUDY, config, result)


def _fmt(v: object, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


INTRO = (
    "Each row is one model of a `train --members` run: its figures from its own"
    " report.json (the test split of the magnetic tiles), at the ok bias its run chose"
    " on the val split (0: none chosen; the ok bias column) and the CPU"
    " minutes it took to have it (user+system CPU of every attempt, each run's final"
    " evaluation included, on this shared machine; the ensemble counts all members"
    " (its own evaluation in its CPU-min), the student all members and its"
    " distillation). One seed per run: the issue's goal asks for 3 seeds at the"
    " recipe's scale, which these runs are not.\n"
)
HEADS = [
    "model",
    "ok bias",
    "balanced acc",
    "defect recall",
    "false alarms",
    "AUROC",
    "pixel fraction",
    "CPU-min",
    "CPU-min to deployable",
]
KEYS = ("balanced_accuracy", "defect_recall", "false_alarm_rate", "defect_auroc", "pixel_fraction")


def run_section(data: dict) -> str:
    """One recorded run: heading, command, note and its table."""
    cfg = data["benchmark"]["config"]
    rows = [
        [r["name"], _fmt(r.get("ok_bias"), 2), *(_fmt(r.get(k)) for k in KEYS)]
        + [_fmt(r.get("cpu_min"), 1), _fmt(r.get("cpu_min_to_deployable"), 1)]
        for r in data["rows"]
    ]
    note = f"{data['note']}\n\n" if data.get("note") else ""
    return (
        f"### {cfg['label']}: {cfg['members']} members of {cfg['timesteps']:,} steps,"
        f" student {cfg['distill_timesteps']:,} steps, seed {cfg['seed']}\n\n"
        f"`{data['command']}` with CONFIG = `{json.dumps(cfg['train_config'])}`\n\n"
        f"{note}" + table(HEADS, rows)
    )


def report(results: list[dict]) -> str:
    """The section's markdown: the introduction and one part per recorded run."""
    return "\n".join([INTRO, *(run_section(d) for d in results)])


def main(argv: list[str] | None = None) -> int:
    ap = parser(study.__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record", help="save a finished run's rows and rewrite the section")
    rec.add_argument("run", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--note", default="", help="what the run shows (printed above its table)")
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "record":
        record(args.run, args.label, args.note)
    return report_recorded(
        FOLDER,
        STUDY,
        "Cost to a deployable model: members, ensemble, distilled student (magnetic tiles)",
        report,
        args,
    )
