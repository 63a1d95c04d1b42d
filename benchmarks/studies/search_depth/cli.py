"""Record a ``train --members`` run's models at every search depth; write the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import RESULTS, parser, report_recorded
from benchmarks.harness import table as md_table
from benchmarks.studies import search_depth as study
from benchmarks.studies.shared import at_depth, record_models

STUDY = "search_depth"
FOLDER = RESULTS / STUDY
TITLE = "The calibrated search depth (magnetic tiles): a shallower search chosen on val"
#: The false-alarm ceiling of the quality goal (#26).
CEILING = 0.05


def fixed_look(decisions: list, d: int) -> float:
    """Share of the episodes that, at depth ``d``, zoom straight in from the overview to
    level ``d`` (a zoom keeps the centre) and are cut there: the look a fixed scan of the
    overview and the frame's centre at each level down to ``d`` would take."""

    def straight(x) -> bool:
        e = x.deeper
        down = len(e) > d and all(e[i][:2] == (i, i + 1) for i in range(d + 1))
        return down and e[d][0] == d  # the action at step d asks for level d + 1: cut

    return float(np.mean([straight(x) for x in decisions]))


def _rates(probs, y, om, bias) -> dict[str, float]:
    from inspector.policy.operating_point import rates_at

    return rates_at(probs, y, om, bias)


def figures(pol: Any, runs: dict[str, tuple]) -> dict[str, Any]:
    """Per depth: val and test AUROC, the biases chosen on val (balanced, <= 5 % false
    alarms) and test's rates at them; then what ``--search-depth auto`` chooses on val
    for each objective and its test figures."""
    from inspector.errors import InspectorError
    from inspector.policy.operating_point import choose_bias, defect_auroc
    from inspector.train.calibration import choose_depth

    om = pol.meta.outcome_matrix
    top = int(pol.meta.scan["zoom_levels"]) - 1
    (yv, dv), (yt, dt) = runs["val"], runs["test"]
    depths = []
    for d in range(top, -1, -1):
        pv, av, _ = at_depth(dv, d)
        pt, at, pix = at_depth(dt, d)
        row: dict[str, Any] = {
            "max_zoom": d,
            "val_auroc": defect_auroc(pv, yv != 0),
            "test_auroc": defect_auroc(pt, yt != 0),
            "val_actions": av,
            "test_actions": at,
            "test_pixel_fraction": pix,
            "test_fixed_look": fixed_look(dt, d) if d < top else None,
        }
        bias, val = choose_bias(pv, yv, om, "balanced")
        row["balanced"] = {"bias": bias, "val": val, "test": _rates(pt, yt, om, bias)}
        try:
            bias, val = choose_bias(pv, yv, om, "max_false_alarms", CEILING)
            row["fa05"] = {"bias": bias, "val": val, "test": _rates(pt, yt, om, bias)}
        except InspectorError as exc:
            row["fa05"] = {"error": str(exc)}
        depths.append(row)
    auto = {}
    for name, objective, target in (
        ("balanced", "balanced", None),
        ("fa05", "max_false_alarms", CEILING),
    ):
        chosen, _ = choose_depth(dv, yv, om, list(range(top, -1, -1)), objective, target)
        auto[name] = chosen["max_zoom"]
    return {"val_parts": len(yv), "test_parts": len(yt), "depths": depths, "auto": auto}


def record(run: Path, label: str, models: list[str], command: str, arm: str = "") -> list[dict]:
    """Save the figures of each of ``models`` (``student``, ``ensemble``, ``members/m0``
    ...) of the finished ``train --members`` run ``run``."""
    return record_models(
        run,
        label,
        models,
        command,
        FOLDER,
        STUDY,
        lambda pol, runs, _model: figures(pol, runs),
        {"arm": arm} if arm else None,
    )


def _f(v: Any, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _point(entry: dict) -> str:
    if "error" in entry:
        return "not met on val"
    t = entry["test"]
    return f"{_f(t['defect_recall'])} / {_f(t['false_alarm_rate'])}"


HEADS = ["run", "model", "depth", "actions/part (test)", "native pixel fraction (test)",
         "val AUROC", "test AUROC", "test balanced (val's balanced point)",
         "test recall / false alarms (<= 5 % FA on val)",
         "auto picks (balanced / <= 5 % FA)"]  # fmt: skip


def _kind(config: dict) -> str:
    """The row group of a recorded model: student, ensemble, member (or the model's own
    name), followed by the arm of training it comes from where it is not the default."""
    model = config["model"]
    base = "member" if model.startswith("members/") else model
    return f"{base}, {config['arm']}" if config.get("arm") else base


def _spread(values: list[float | None]) -> str:
    """``mean (min-max)`` of the values (one value: itself)."""
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    if len(v) == 1:
        return f"{v[0]:.3f}"
    return f"{np.mean(v):.3f} ({min(v):.3f}-{max(v):.3f})"


def _test(row: dict, objective: str, key: str) -> float | None:
    entry = row[objective]
    return None if "error" in entry else entry["test"][key]


def _cells(rows: list[dict]) -> list[str]:
    """Mean (range) of the test figures of these (model, depth) rows."""
    return [
        _spread([r["test_actions"] for r in rows]),
        _spread([r["test_pixel_fraction"] for r in rows]),
        _spread([r.get("test_fixed_look") for r in rows]),
        _spread([r["test_auroc"] for r in rows]),
        _spread([_test(r, "balanced", "balanced_accuracy") for r in rows]),
        _spread([_test(r, "fa05", "defect_recall") for r in rows]),
        _spread([_test(r, "fa05", "false_alarm_rate") for r in rows]),
    ]


SUMMARY_HEADS = ["model", "search depth", "models", "actions/part", "native pixel fraction",
                 "parts with the fixed look (overview, centre zoomed to the depth)",
                 "AUROC", "balanced acc (val's balanced point)",
                 "recall (<= 5 % FA on val)", "false alarms there"]  # fmt: skip


def summary_rows(results: list[dict]) -> list[list]:
    """By kind of model: each depth, then what ``auto`` picked per objective."""
    out = []
    known = ("student", "ensemble", "member")
    others = sorted({_kind(d["benchmark"]["config"]) for d in results} - set(known))
    for kind in (*known, *others):
        mine = [d for d in results if _kind(d["benchmark"]["config"]) == kind]
        if not mine:
            continue
        top = mine[0]["depths"][0]["max_zoom"]
        for depth in range(top, -1, -1):
            rows = [r for d in mine for r in d["depths"] if r["max_zoom"] == depth]
            name = f"{depth} (full)" if depth == top else str(depth)
            out.append([kind, name, len(rows), *_cells(rows)])
        for objective, words in (("balanced", "balanced"), ("fa05", "<= 5 % FA")):
            rows = [next(r for r in d["depths"] if r["max_zoom"] == d["auto"][objective])
                    for d in mine]  # fmt: skip
            picks = ", ".join(str(d["auto"][objective]) for d in mine)
            out.append([kind, f"auto for {words} (picked {picks})", len(rows), *_cells(rows)])
            if kind.startswith("member"):
                continue
            # A model recorded without its run's members has no pooled pick: left out.
            picked = [(d, members_pick(results, d["benchmark"]["config"]["label"], objective))
                      for d in mine]  # fmt: skip
            picked = [(d, p) for d, p in picked if p is not None]
            if not picked:
                continue
            depths = [p for _d, p in picked]
            rows = [next(r for r in d["depths"] if r["max_zoom"] == p) for d, p in picked]
            picks = ", ".join(str(p) for p in depths)
            out.append([kind, f"members' pooled pick for {words} (picked {picks})", len(rows),
                        *_cells(rows)])  # fmt: skip
    return out


def members_pick(results: list[dict], label: str, objective: str) -> int | None:
    """The depth ``train --members`` gives the ensemble and the student of run ``label``:
    its members' val figures pooled (:func:`inspector.train.calibration.pooled_depth`);
    None when none of its members was recorded."""
    from inspector.train.calibration import pooled_depth

    tables = []
    for d in results:
        c = d["benchmark"]["config"]
        if c["label"] != label or not c["model"].startswith("members/"):
            continue
        table = []
        for row in d["depths"]:
            entry = row[objective]
            base = {"max_zoom": row["max_zoom"], "mean_actions": row["val_actions"]}
            if "error" in entry:
                table.append(base | {"error": entry["error"]})
            else:
                table.append(base | {"ok_bias": entry["bias"], "at_bias": entry["val"]})
        tables.append(table)
    if not tables:
        return None
    goal = "max_false_alarms" if objective == "fa05" else "balanced"
    return pooled_depth(tables, goal)[0]


def notes(results: list[dict]) -> str:
    """One line per model that is not a run's own student, ensemble or member: what it is
    (the command it was recorded with)."""
    seen: dict[str, list[str]] = {}
    for d in results:
        kind = _kind(d["benchmark"]["config"])
        if kind not in ("student", "ensemble", "member"):
            kinds = seen.setdefault(d.get("command", ""), [])
            kinds += [kind] if kind not in kinds else []
    lines = [f"- {', '.join(f'`{k}`' for k in ks)}: {c}" for c, ks in sorted(seen.items())]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def report(results: list[dict]) -> str:
    """The section: by kind of model at each depth and under the auto rule (means over
    runs), then every model at every depth."""
    results = sorted(results, key=lambda d: (d["benchmark"]["config"]["label"],
                                             d["benchmark"]["config"]["model"]))  # fmt: skip
    labels = sorted({d["benchmark"]["config"]["label"] for d in results})
    detail = []
    for d in results:
        c = d["benchmark"]["config"]
        top = d["depths"][0]["max_zoom"]
        for row in d["depths"]:
            picks = [k for k in ("balanced", "fa05") if d["auto"][k] == row["max_zoom"]]
            detail.append([
                c["label"], c["model"],
                f"{row['max_zoom']}" + (" (full)" if row["max_zoom"] == top else ""),
                _f(row["test_actions"], 2), _f(row["test_pixel_fraction"]),
                _f(row["val_auroc"]), _f(row["test_auroc"]),
                _f(row["balanced"]["test"]["balanced_accuracy"]), _point(row["fa05"]),
                " / ".join(picks) or "",
            ])  # fmt: skip
    return (
        f"Every model of the `train --members 4` runs {', '.join(labels)} (magnetic tiles;"
        " members_cost's tiles_m4_150k_s0_sup, _s1, _s2: their commands there) run once at"
        " full depth on the val (130 tiles) and test (263 tiles) splits and read at every"
        " search depth: 2 = native (the full search), 1 = the middle zoom level, 0 = the"
        " overview alone. Every choice (each ok bias, the depth `--search-depth auto`"
        " picks) is made on val; every figure is on test. Means over the models, range in"
        " brackets; a `member` row pools the 4 members of each run.\n\n"
        + md_table(SUMMARY_HEADS, summary_rows(results))
        + notes(results)
        + "\nEvery model at every depth (the last column: the objectives for which `auto`"
        " picked that depth on val):\n\n" + md_table(HEADS, detail)
    )


def main(argv: list[str] | None = None) -> int:
    ap = parser(study.__doc__)
    sub = ap.add_subparsers(dest="verb", required=True)
    rec = sub.add_parser("record", help="record a finished train --members run's models")
    rec.add_argument("run", type=Path)
    rec.add_argument("--label", required=True)
    rec.add_argument("--models", default="student,ensemble", help="comma-separated")
    rec.add_argument("--command", default="", help="the command that trained the run")
    rec.add_argument("--arm", default="", help="how the run differs from the default recipe")
    sub.add_parser("report", help="rewrite the section from the saved results")
    args = ap.parse_args(argv)
    if args.verb == "record":
        record(args.run, args.label, args.models.split(","), args.command, args.arm)
    return report_recorded(FOLDER, STUDY, TITLE, report, args)
