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


def _rows(run: Path, summary: dict, members: list[str]) -> list[dict]:
    """The rows of a run: its summary's, or (not finished) those of the finished models
    (the ensemble and the student only once every member is)."""
    from inspector.train.members import summarise

    if summary.get("status") == "done":
        return summary["rows"]
    done = [m for m in members if (run / "members" / m / "cost.json").is_file()]
    finished = set(done)
    if len(done) == len(members):
        finished |= {n for n in ("ensemble", "student") if (run / n / "cost.json").is_file()}
    return [r for r in summarise(run, done)["rows"] if r["name"] in finished]


def record(
    run: Path,
    label: str,
    note: str = "",
    partial: bool = False,
    command: str = "",
    fa05: Path | None = None,
) -> dict:
    """Save the rows of a ``--members`` run (with its configuration).

    :param partial: record a run that has not finished: its finished members (and the
        ensemble and student once they are), marked unfinished.
    :param command: the command as it was typed (default: rebuilt from the run).
    :param fa05: a folder of ``MODEL.fa05.test.json`` (``eval --json`` on test after
        ``calibrate --max-false-alarms 0.05 --confidence none`` on val): kept as the rows'
        ``at_fa05``.
    :raises SystemExit: the run did not finish and ``partial`` is not given.
    """
    summary = json.loads((run / "members.json").read_text())
    status = summary.get("status")
    if status != "done" and not partial:
        raise SystemExit(f"{run}: the run has not finished (status {status}); --partial?")
    spec = json.loads((run / "members" / "m0" / "member.json").read_text())
    asked = summary["asked"]
    params = " ".join(_param(k, v) for k, v in spec["params"].items())
    command = command or (
        f"python main.py train --profile reward_profiles/{Path(spec['profile']).name}"
        f" --camera {spec['camera']} {params} --config CONFIG --timesteps"
        f" {asked['timesteps']} --members {asked['members']} --distill-timesteps"
        f" {asked['distill_timesteps']} --seed {asked['seed']} --parallel 1"
    )
    members = [f"m{i}" for i in range(int(asked["members"]))]
    found = _rows(run, summary, members)
    rows = [{k: v for k, v in r.items() if k != "path"} for r in found]
    for row, r in zip(rows, found):  # a summary from before rows had the bias
        report = Path(r["path"]) / "report.json"
        if row.get("ok_bias") is None and report.is_file():
            row["ok_bias"] = json.loads(report.read_text()).get("ok_bias")
    for row, r in zip(rows, found) if fa05 else []:  # the goal's point, chosen on val
        at = _read(fa05 / f"{Path(r['path']).name}.fa05.test.json", None)  # student_2 ...
        if at:
            row["at_fa05"] = {k: at.get(k) for k in KEYS_FA05}
    costs = {}
    for r in found:
        path = Path(r["path"]) / "cost.json"
        if path.is_file():
            costs[r["name"]] = json.loads(path.read_text())
    config = {"label": label, **asked, "train_config": config_changes(spec["config"])}
    config["distill"] = student_distillation(run)
    chosen = summary.get("student")
    if chosen:  # the student checked against the ensemble on val, distilled again if short
        config["student_check"] = {k: chosen.get(k) for k in ("metric", "shortfall")}
        # a member spec written before the field: the run's check used the default
        most = spec["config"].get("student_attempts", TrainConfig.student_attempts)
        config["student_check"]["attempts"] = most
        # the give-up rule the students ran under (their own specs: a resumed run's
        # members may be older than its students), for runs since the fields
        student = (_read(run / "student" / "member.json", {}) or {}).get("config") or {}
        for key in ("student_give_up", "student_give_up_margin", "student_give_up_patience"):
            if key in student:
                config["student_check"][key] = student[key]
    result = {"note": note, "command": command, "status": status, "rows": rows, "costs": costs}
    if chosen:
        result["student"] = chosen
    # every finished member's and student attempt's val checks (a student's curve shows
    # where a give-up rule would have stopped it)
    folders = {m: run / "members" / m for m in members} | {
        a["name"]: run / a["name"] for a in (chosen or {}).get("attempts", [])
    }
    result["val_checks"] = {
        m: _progress(f, m)["val_checks"]
        for m, f in folders.items()
        if (f / "cost.json").is_file() and (f / "select.json").is_file()
    }
    if status != "done":
        result["unfinished"] = [
            _progress(run / "members" / m, m) for m in members if m not in costs
        ] + [_progress(run / "student", "student")] * (run / "student" / "attempts.json").is_file()
    return save_result(FOLDER / f"{label}.json", STUDY, config, result)


KEYS_FA05 = ("defect_recall", "false_alarm_rate", "balanced_accuracy")


def student_distillation(run: Path) -> dict:
    """How the run distilled its student (from the student's spec): ``distill`` and its
    settings; a student from before ``distill`` was a field was distilled by PPO."""
    spec = _read(run / "student" / "member.json", {}) or {}
    cfg = spec.get("config") or {}
    way = cfg.get("distill", "ppo")
    keys = (
        ("distill_init", "distill_rounds", "student_cnn_channels", "cnn_separable")
        if way == "supervised"
        else ("distill_w_kd",)
    )
    return {"distill": way, **{k: cfg[k] for k in keys if k in cfg}}


def _read(path: Path, default: object) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _progress(folder: Path, name: str) -> dict:
    """How far an unfinished model got: steps, CPU so far by phase, its val checks."""
    latest = _read(folder / "checkpoints" / "latest.json", {})
    attempts = _read(folder / "attempts.json", [])
    checks = _read(folder / "select.json", {}).get("checks", [])
    keep = ("steps", "operating_point", "ok_bias", "balanced_accuracy", "defect_auroc")
    return {
        "name": name,
        "steps": int(latest.get("num_timesteps", 0)),
        "cpu_s": round(sum(a.get("cpu_s", 0.0) for a in attempts), 2),
        "phases": _read(folder / "phases.json", {}),
        "val_checks": [{k: c.get(k) for k in keep} for c in checks],
    }


def _checks_table(checks: list) -> str:
    rows = [
        [f"{c['steps']:,}", _fmt(c.get("operating_point")), _fmt(c.get("ok_bias"), 2),
         _fmt(c.get("balanced_accuracy")), _fmt(c.get("defect_auroc"))]
        for c in checks
    ]  # fmt: skip
    heads = ["steps", "val figure at its operating point", "ok bias",
             "val balanced acc at bias 0", "val AUROC"]  # fmt: skip
    return table(heads, rows)


def progress_section(data: dict) -> str:
    """The val checks of the finished members, then the unfinished models of a partial
    run: how far each got and its val checks."""
    out = [
        f"Val checks of {name} (130 val tiles):\n\n" + _checks_table(checks)
        for name, checks in data.get("val_checks", {}).items()
        if checks
    ]
    for p in data.get("unfinished", []):
        if not p["steps"] and not p["cpu_s"]:
            out.append(f"{p['name']}: not started.\n")
            continue
        phases = ", ".join(f"{k} {v / 60:.1f}" for k, v in p["phases"].items())
        out.append(
            f"{p['name']}: {p['steps']:,} PPO steps reached (checkpoint), {p['cpu_s'] / 60:.1f}"
            f" CPU-min so far (by phase, CPU-min: {phases or 'none counted yet'}).\n"
        )
        if p["val_checks"]:
            out.append("\n" + _checks_table(p["val_checks"]))
    return "\n".join(out)


#: A run's phases (inspector.train.phases) and their headings.
PHASES = (
    ("perception", "perception pretraining"),
    ("cloning", "cloning"),
    ("distillation", "supervised distillation"),
    ("ppo", "PPO"),
    ("val_checks", "val checks"),
    ("calibration", "calibration"),
    ("evaluation", "evaluation (test)"),
)


def phase_table(data: dict) -> str:
    """Where each model's training CPU went, by phase (runs that recorded phases)."""
    rows = []
    for name, cost in data.get("costs", {}).items():
        phases = cost.get("phases") or {}
        if not phases:
            continue
        total = sum(phases.values())
        cells = [
            f"{phases.get(k, 0.0) / 60:.1f} ({100 * phases.get(k, 0.0) / total:.0f} %)"
            for k, _ in PHASES
        ]
        rows.append([name, *cells, f"{total / 60:.1f}", f"{cost.get('cpu_s', 0.0) / 60:.1f}"])
    if not rows:
        return ""
    heads = ["model", *(h for _, h in PHASES), "phases CPU-min", "attempts CPU-min"]
    return (
        "Where the time goes (CPU-min of each phase, share of the phases' sum; the"
        " attempts' total also counts start-up, the run files and a killed attempt's"
        " unfinished phase):\n\n" + table(heads, rows)
    )


def _fmt(v: object, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


INTRO = (
    "Each row is one model of a `train --members` run: its figures from its own"
    " report.json (the test split of the magnetic tiles), at the ok bias its run chose"
    " on the val split (0: none chosen; the ok bias column) and the CPU"
    " minutes it took to have it (user+system CPU of every attempt, each run's final"
    " evaluation included, on this shared machine; the ensemble counts all members"
    " (its own evaluation in its CPU-min), the student all members and its"
    " distillation). A member is what `train` without `--members` trains with the same"
    " seed: its row is the cost of one default agent.\n\n"
    "Goals (issue #26): the distilled student at defect recall >= 0.95 with false alarms"
    " <= 0.05 (operating point chosen on val), balanced accuracy >= 0.90, <= 15 % of"
    " tiling's pixels; the student within 80 CPU-minutes; each figure over at least 3"
    " seeds at the recipe's scale (the table over seeds, where a recipe has more than"
    " one finished seed, comes first; each run follows with its own rows).\n"
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


def _way(cfg: dict) -> str:
    d = cfg.get("distill") or {"distill": "ppo"}  # recorded before the field: PPO
    if d.get("distill") == "supervised" and d.get("distill_init") == "scratch":
        width = d.get("student_cnn_channels") or "the members'"
        cnn = ", depthwise-separable CNN" if d.get("cnn_separable") else ""
        return f" (supervised distillation from scratch, width {width}{cnn})"
    if d.get("distill") == "supervised":
        return f" (supervised distillation from the {d.get('distill_init', 'lead')} member)"
    return " (PPO distillation)"


def run_section(data: dict) -> str:
    """One recorded run: heading, command, note and its table."""
    cfg = data["benchmark"]["config"]
    rows = [
        [r["name"], _fmt(r.get("ok_bias"), 2), *(_fmt(r.get(k)) for k in KEYS)]
        + [_fmt(r.get("cpu_min"), 1), _fmt(r.get("cpu_min_to_deployable"), 1)]
        for r in data["rows"]
    ]
    heads = HEADS
    if any(r.get("at_fa05") for r in data["rows"]):
        heads = [*HEADS, "at <= 5 % FA on val: recall / false alarms / balanced (test)"]
        for row, r in zip(rows, data["rows"]):
            at = r.get("at_fa05") or {}
            row.append(" / ".join(_fmt(at.get(k)) for k in KEYS_FA05) if at else "-")
    note = f"{data['note']}\n\n" if data.get("note") else ""
    status = data.get("status", "done")
    state = "" if status == "done" else f" (not finished: at the {status} stage)"
    phases = phase_table(data)
    kept = data.get("student")
    return (
        f"### {cfg['label']}: {cfg['members']} members of {cfg['timesteps']:,} steps,"
        f" student {cfg['distill_timesteps']:,} steps{_way(cfg)}, seed {cfg['seed']}{state}\n\n"
        f"`{data['command']}`; the members' TrainConfig where it differs from the"
        f" defaults: `{json.dumps(cfg['train_config'])}`\n\n"
        f"{note}"
        + (table(heads, rows) if rows else "No model of the run has finished yet.\n")
        + (f"\nStudent kept: {kept['kept']} ({kept['why']}).\n" if kept else "")
        + (f"\n{phases}" if phases else "")
        + (
            f"\n{progress_section(data)}"
            if data.get("unfinished") or data.get("val_checks")
            else ""
        )
    )


def report(results: list[dict]) -> str:
    """The section's markdown: the introduction and one part per recorded run."""
    from benchmarks.studies.members_cost.seeds import seeds_table

    over = seeds_table(results)
    return "\n".join([INTRO, *([over] if over else []), *(run_section(d) for d in results)])


def main(argv: list[str] | None = None) -> int:
    ap = parser(study.__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record", help="save a finished run's rows and rewrite the section")
    rec.add_argument("run", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--note", default="", help="what the run shows (printed above its table)")
    rec.add_argument("--partial", action="store_true", help="record an unfinished run")
    rec.add_argument("--command", default="", help="the command as typed (default: rebuilt)")
    rec.add_argument(
        "--fa05",
        type=Path,
        help="folder of MODEL.fa05.test.json files: each model calibrated with"
        " `calibrate --max-false-alarms 0.05` on val (the rate seen there: today's"
        " `--confidence none`), then `eval --json` on test",
    )
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "record":
        record(args.run, args.label, args.note, args.partial, args.command, args.fa05)
    return report_recorded(
        FOLDER,
        STUDY,
        "Cost to a deployable model: members, ensemble, distilled student (magnetic tiles)",
        report,
        args,
    )
