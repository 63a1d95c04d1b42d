"""Section 4b: the aggregations tried on the recorded heads (:mod:`.tiles_why`), offline.

Every row is a defect score per frame (``1 - p(free)`` or a combination of several
observations' scores), scored as section 1b scores a driver: the threshold for <= 5 %
false alarms on the val frames, recall, false alarms and per-class recall on the test
frames, and the defect AUROC on test.

Run: ``python -m benchmarks.studies.search_controls.tiles_why_report`` (writes the
section ``search_controls_tiles_why`` of docs/benchmarks.md from the saved records;
``--no-write`` prints it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.studies.search_controls.analysis import FA_CEILING, threshold_at
from benchmarks.studies.search_controls.report import _f
from benchmarks.studies.search_controls.tiles_why import FOLDER, K_NATIVE, VERSION

EPS = 1e-4
#: A glimpse "on the defect" holds at least this many defect pixels (the profile's
#: focus term's ``min_area``).
ON_DEFECT_PX = 4


def _s(p: np.ndarray) -> np.ndarray:
    """Defect score ``1 - p(free)`` of probabilities [..., C]."""
    return 1.0 - np.asarray(p, dtype=np.float64)[..., 0]


def _logit(s: np.ndarray) -> np.ndarray:
    s = np.clip(s, EPS, 1 - EPS)
    return np.log(s / (1 - s))


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def noisy_or(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """``1 - prod(1 - s)``: a defect if any observation says so, independently."""
    return 1.0 - np.prod(1.0 - np.clip(scores, 0.0, 1.0), axis=axis)


def mean_logodds(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The observations' mean log-odds, back to a score."""
    return _sig(_logit(scores).mean(axis=axis))


def before_native(part: dict, native: int) -> np.ndarray:
    """Per frame, the index of the agent's observation just before its first native
    glimpse (its own decision where it never reached native)."""
    lv, n = part["agent_level"], part["agent_len"]
    out = n - 1
    for i in range(len(n)):
        hit = np.flatnonzero(lv[i, : n[i]] >= native)
        if hit.size:
            out[i] = max(0, hit[0] - 1)
    return out


def _avg(x: np.ndarray) -> float | None:
    """Mean of the finite entries, None when there are none."""
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else None


def agent_scores(part: dict) -> np.ndarray:
    """[N, T] the agent's defect scores at each of its observations (NaN past its end)."""
    s = _s(part["agent"])
    t = np.arange(s.shape[1])[None]
    return np.where(t < part["agent_len"][:, None], s, np.nan)


#: name -> (what it is, score function of one split's record).
AGGREGATIONS: dict[str, tuple[str, Callable[[dict, int], np.ndarray]]] = {
    "overview": ("overview alone", lambda p, nat: _s(p["ov"])),
    "agent": ("agent, its own stops (section 1b's row)", lambda p, nat: _s(p["agent"][:, -1])),
    "agent_zoom1": (
        "agent cut after its first action (a zoom)",
        lambda p, nat: _s(p["agent"][:, 1]),
    ),
    "agent_before_native": (
        "agent stopped before its first native glimpse (c)",
        lambda p, nat: _s(p["agent"][np.arange(len(p["ov"])), before_native(p, nat)]),
    ),
    "agent_max": (
        "agent, max over all its observations (b)",
        lambda p, nat: np.nanmax(agent_scores(p), axis=1),
    ),
    "agent_ov_max": (
        "agent: max(overview, its decision) (b)",
        lambda p, nat: np.maximum(_s(p["ov"]), _s(p["agent"][:, -1])),
    ),
    "agent_ov_noisyor": (
        "agent: noisy-or(overview, its decision) (b)",
        lambda p, nat: noisy_or(np.stack([_s(p["ov"]), _s(p["agent"][:, -1])], -1)),
    ),
    "agent_ov_logodds": (
        "agent: mean log-odds(overview, its decision) (b)",
        lambda p, nat: mean_logodds(np.stack([_s(p["ov"]), _s(p["agent"][:, -1])], -1)),
    ),
    "agent_all_logodds": (
        "agent: mean log-odds over all its observations (b)",
        lambda p, nat: _sig(np.nanmean(_logit(agent_scores(p)), axis=1)),
    ),
    "agent_keep": (
        "agent, its own stops, read with the overview's glimpse kept in memory (a)",
        lambda p, nat: _s(p["agent_keep"][:, -1]),
    ),
    "mid_ov_max": (
        "overview and the middle-level tiles each alone, max (d)",
        lambda p, nat: np.maximum(_s(p["ov"]), np.nanmax(_s(p["mid_alone"]), axis=1)),
    ),
    "mid_ov_logodds": (
        "overview and the middle-level tiles each alone, mean log-odds (d)",
        lambda p, nat: _sig(
            np.nanmean(
                _logit(np.concatenate([_s(p["ov"])[:, None], _s(p["mid_alone"])], 1)), axis=1
            )
        ),
    ),
    "mid_acc_max": (
        "the middle-level tiles one after the other, max over them (d)",
        lambda p, nat: np.nanmax(_s(p["mid_acc"]), axis=1),
    ),
    "acc": (
        f"{K_NATIVE} random native glimpses, verdict at the last (memory as it is)",
        lambda p, nat: _s(p["acc"][:, -1]),
    ),
    "keep": (
        f"{K_NATIVE} random native glimpses, the overview's glimpse kept in memory (a)",
        lambda p, nat: _s(p["keep"][:, -1]),
    ),
    "acc_1": ("1 random native glimpse after the overview", lambda p, nat: _s(p["acc"][:, 0])),
    "alone_max": (
        f"{K_NATIVE} random native glimpses each alone, max",
        lambda p, nat: _s(p["alone"]).max(axis=1),
    ),
    "alone_ov_max": (
        f"overview and {K_NATIVE} random native glimpses each alone, max (b)",
        lambda p, nat: np.maximum(_s(p["ov"]), _s(p["alone"]).max(axis=1)),
    ),
    "alone_ov_logodds": (
        f"overview and {K_NATIVE} random glimpses each alone, mean log-odds (b)",
        lambda p, nat: mean_logodds(np.concatenate([_s(p["ov"])[:, None], _s(p["alone"])], 1)),
    ),
    "ov_x_native": (
        f"overview's log-odds + max log-odds of {K_NATIVE} random glimpses alone (d)",
        lambda p, nat: _sig(_logit(_s(p["ov"])) + _logit(_s(p["alone"]).max(axis=1))),
    ),
}


def _auroc(s: np.ndarray, defect: np.ndarray) -> float | None:
    from inspector.policy.operating_point import defect_auroc

    return defect_auroc((1.0 - s)[:, None], list(defect))


def score_scores(sv: np.ndarray, yv: np.ndarray, st: np.ndarray, yt: np.ndarray) -> dict:
    """Recall / false alarms / per-class recall at <= 5 % val false alarms; AUROC on test."""
    thr = threshold_at(sv[yv == 0], FA_CEILING)
    flagged, defect = st > thr, yt != 0
    return {
        "threshold": float(thr),
        "recall": float(flagged[defect].mean()),
        "false_alarms": float(flagged[~defect].mean()),
        "recall_by_class": {int(c): float(flagged[yt == c].mean()) for c in np.unique(yt[defect])},
        "auroc": _auroc(st, defect),
        "flagged": flagged,
    }


def rows_for(rec: dict) -> list[dict]:
    """Every aggregation of :data:`AGGREGATIONS` on one model's record."""
    nat = int(rec["levels"]) - 1
    val, test = rec["val"], rec["test"]
    out = []
    for key, (words, fn) in AGGREGATIONS.items():
        r = score_scores(fn(val, nat), val["labels"], fn(test, nat), test["labels"])
        out.append({"key": key, "words": words, **r})
    return out


def glimpse_evidence(rec: dict) -> dict:
    """What one native glimpse says on its own, by frame class and by whether it holds
    defect pixels; what the best-placed one (the oracle) says on a defective frame."""
    t = rec["test"]
    y = t["labels"]
    s_alone, on = _s(t["alone"]), t["glimpse_def"] >= ON_DEFECT_PX
    defect = (y != 0)[:, None] & np.ones_like(on)
    ov = _s(t["ov"])
    orc = _s(t["oracle"])
    d = y != 0
    mid_def = np.nan_to_num(t["mid_def"], nan=-1.0)
    return {
        "ov_free": float(ov[~d].mean()),
        "ov_defect": float(ov[d].mean()),
        "alone_free": float(s_alone[~d].mean()),
        "alone_defect_off": float(s_alone[defect & ~on].mean()),
        "alone_defect_on": float(s_alone[defect & on].mean()) if (defect & on).any() else None,
        "n_on": int((defect & on).sum()),
        "oracle_defect": float(np.nanmean(orc[d])),
        "oracle_above_ov": float(np.mean(orc[d] > ov[d])),
        "oracle_on": float(np.mean(t["oracle_def"][d] >= ON_DEFECT_PX)),
        "mid_free": float(np.nanmean(_s(t["mid_alone"])[~d])),
        "mid_defect_off": _avg(
            _s(t["mid_alone"])[d[:, None] & (mid_def >= 0) & (mid_def < ON_DEFECT_PX)]
        ),
        "mid_defect_on": _avg(_s(t["mid_alone"])[d[:, None] & (mid_def >= ON_DEFECT_PX)]),
        "mid_oracle": float(np.nanmean(_s(t["mid_oracle"])[d])),
        "mid_oracle_above_ov": float(np.mean(_s(t["mid_oracle"])[d] > ov[d])),
        "acc_last_free": float(_s(t["acc"][:, -1])[~d].mean()),
        "keep_last_free": float(_s(t["keep"][:, -1])[~d].mean()),
        "acc_last_defect": float(_s(t["acc"][:, -1])[d].mean()),
        "keep_last_defect": float(_s(t["keep"][:, -1])[d].mean()),
    }


def agent_native_evidence(rec: dict) -> dict:
    """The agent's own native glimpses: the share on defect pixels, per class, and how the
    defect score moves from just before its first native glimpse to its decision."""
    t = rec["test"]
    nat = int(rec["levels"]) - 1
    y, n = t["labels"], t["agent_len"]
    lv, dp = t["agent_level"], t["agent_def"]
    s = _s(t["agent"])
    bn = before_native(t, nat)
    by = {}
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        nat_g = [(lv[i, : n[i]] >= nat) for i in idx]
        on = [((lv[i, : n[i]] >= nat) & (dp[i, : n[i]] >= ON_DEFECT_PX)) for i in idx]
        total = sum(int(g.sum()) for g in nat_g)
        by[int(c)] = {
            "frames": len(idx),
            "native_per_frame": total / len(idx),
            "on_defect": (sum(int(o.sum()) for o in on) / total) if total else None,
            "reached_native": float(np.mean([g.any() for g in nat_g])),
            "score_before": float(s[idx, bn[idx]].mean()),
            "score_decision": float(s[idx, -1].mean()),
        }
    return by


def load_records(folder: Path) -> dict[str, dict]:
    """The saved records (``<model>.npz``), each as {"val": {...}, "test": {...}, ...}."""
    out = {}
    for path in sorted(folder.glob("*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        with np.load(path) as z:
            rec: dict = {"val": {}, "test": {}}
            for key in z.files:
                if "/" in key:
                    split, name = key.split("/", 1)
                    v = z[key]
                    rec[split][name] = v.astype(np.float64) if v.dtype.kind == "f" else v
                else:
                    rec[key] = z[key]
            rec["classes"] = [str(c) for c in rec["classes"]]
            rec["config"] = json.loads(str(rec["config"]))
            rec["measured"] = str(rec["measured"])
        if rec["config"].get("version") == VERSION:  # an older layout is recorded again
            out[path.stem] = rec
    return out


# -- the report section ---------------------------------------------------------------
SECTION = "search_controls_tiles_why"
TITLE = "Why native glimpses hurt on the magnetic tiles (issue #27, section 4b)"
#: Rows shown in the per-model tables, in order.
SHOWN = tuple(AGGREGATIONS)


def _vs_overview(row: dict, ov: dict, y: np.ndarray) -> str:
    """Defective test frames the row flags and the overview does not / the reverse."""
    d = y != 0
    gained = int((row["flagged"] & ~ov["flagged"] & d).sum())
    lost = int((~row["flagged"] & ov["flagged"] & d).sum())
    return f"+{gained} / -{lost}"


def model_table(rec: dict) -> str:
    rows = {r["key"]: r for r in rows_for(rec)}
    y = rec["test"]["labels"]
    classes = rec["classes"][1:]
    head = (
        "| aggregation | recall at <= 5% val FA | test FA | recall "
        + " / ".join(classes)
        + " | defect AUROC | defective frames gained / lost vs the overview |\n"
        "|---|---|---|---|---|---|\n"
    )
    body = ""
    for key in SHOWN:
        r = rows[key]
        by = " / ".join(_f(r["recall_by_class"].get(i + 1), ".2f") for i in range(len(classes)))
        body += (
            f"| {r['words']} | {r['recall']:.3f} | {r['false_alarms']:.3f} | {by} |"
            f" {_f(r['auroc'])} | {_vs_overview(r, rows['overview'], y)} |\n"
        )
    return head + body


def evidence_table(recs: dict[str, dict]) -> str:
    head = (
        "| model | overview: free / defective | one native glimpse alone: free / defective,"
        " off the defect / on it (glimpses on it) | best-placed native glimpse (oracle):"
        " defective / share above its overview | after 8 random native glimpses: free /"
        " defective | same, the overview's glimpse kept in memory: free / defective |"
        " one middle-level tile alone: free / defective, off / on the defect | best-placed"
        " middle-level viewport: defective / share above its overview |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for name, rec in recs.items():
        e = glimpse_evidence(rec)
        body += (
            f"| {name} | {e['ov_free']:.3f} / {e['ov_defect']:.3f} |"
            f" {e['alone_free']:.3f} / {e['alone_defect_off']:.3f} /"
            f" {_f(e['alone_defect_on'])} ({e['n_on']}) |"
            f" {e['oracle_defect']:.3f} / {e['oracle_above_ov']:.2f} |"
            f" {e['acc_last_free']:.3f} / {e['acc_last_defect']:.3f} |"
            f" {e['keep_last_free']:.3f} / {e['keep_last_defect']:.3f} |"
            f" {e['mid_free']:.3f} / {_f(e['mid_defect_off'])} / {_f(e['mid_defect_on'])} |"
            f" {e['mid_oracle']:.3f} / {e['mid_oracle_above_ov']:.2f} |\n"
        )
    return head + body


def agent_table(recs: dict[str, dict]) -> str:
    head = (
        "| model | class | test frames | reached native | native glimpses per frame |"
        " share of them on defect pixels | defect score before its first native glimpse"
        " -> at its decision |\n|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for name, rec in recs.items():
        for c, v in agent_native_evidence(rec).items():
            body += (
                f"| {name} | {rec['classes'][c]} | {v['frames']} | {v['reached_native']:.2f} |"
                f" {v['native_per_frame']:.1f} | {_f(v['on_defect'], '.2f')} |"
                f" {v['score_before']:.3f} -> {v['score_decision']:.3f} |\n"
            )
    return head + body


def section(recs: dict[str, dict], notes: list[str]) -> str:
    """The section body from the records and the findings (written by hand, figures
    from the tables)."""
    first = next(iter(recs.values()))
    t = first["test"]
    n_def = int((t["labels"] != 0).sum())
    stamps = sorted(r["measured"] for r in recs.values())
    runs = sorted({str(r.get("config", {}).get("run", "tiles_m4_s0")) for r in recs.values()})
    seeds = ", ".join(r.rsplit("_s", 1)[-1] for r in runs)
    parts = [
        "Models: "
        + ", ".join(recs)
        + " of "
        + " and ".join(f"`runs/members_cost/{r}`" for r in runs)
        + (" (section 1b's run: " if runs == ["tiles_m4_s0"] else " (")
        + f"`train --preset footage --members 4 --seed {seeds}`; read, not retrained)."
        f" Recorded {stamps[0]} to {stamps[-1]}, one process, one torch thread. One pass per"
        " model over the val (130) and test (263) frames records the verdict head's class"
        " probabilities after the overview, along the agent's own episode (with each"
        f" glimpse's zoom level and defect pixels from the footage's masks), after each of"
        f" {K_NATIVE} native glimpses at random positions (seeded per frame: seed 0 on val,"
        " 1 on test) placed one after the other as the fixed scans place them, the same"
        " with the overview's glimpse held in the 4-slot glimpse memory's last slot, each"
        " of them alone after the overview, and, on a defective frame, the native viewport"
        " holding the most defect pixels (an oracle) alone after the overview; the same at"
        " the middle zoom level (the level of the agent's first zoom) over the frame's"
        " tiling at that level (its tiles alone and one after the other) and its"
        " best-placed middle-level viewport; and the verdict along the agent's own"
        " trajectory read with the overview's glimpse held in memory. Every"
        " aggregation below is scored from that record offline: threshold for <= 5 % false"
        " alarms on val, recall, false alarms and per-class recall on the test frames"
        f" ({n_def} defective; two standard errors of a recall near 0.8 are about +-0.10,"
        " so the gained / lost column, paired on the same frames, is the finer comparison)."
        " The records: `benchmarks/results/search_controls/full/tiles_why/<model>.npz`.",
        "",
        "What one glimpse says (mean defect score 1 - p(free) on the test frames):",
        "",
        evidence_table(recs),
        "Where the agent's own native glimpses land, and what they do to its defect score"
        " (test frames):",
        "",
        agent_table(recs),
    ]
    for name, rec in recs.items():
        parts += [f"Aggregations, {name} (test frames):", "", model_table(rec)]
    parts += notes
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from benchmarks import harness

    ap = argparse.ArgumentParser(description="write section 4b from the saved records")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    out = args.out or harness.ROOT / "benchmarks" / "results" / "search_controls" / "full"
    recs = load_records(out / FOLDER)
    order = ("student", "ensemble", "m0", "m1", "m2", "m3")
    recs = {n: recs[n] for n in order if n in recs} | recs
    if not recs:
        print("tiles_why: no records", flush=True)
        return 1
    from benchmarks.studies.search_controls.tiles_why_notes import notes

    body = section(recs, notes(recs))
    command = (
        "python -m benchmarks.studies.search_controls.tiles_why --run RUN --models "
        + ",".join(recs)
        + " && python -m benchmarks.studies.search_controls.tiles_why_report"
    )
    if not args.no_write:
        harness.write_section(SECTION, TITLE, body, command, keep_measured=True)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
