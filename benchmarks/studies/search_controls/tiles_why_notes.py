"""Section 4b's summary table and findings, with their figures read from the records
(:mod:`.tiles_why_report`): what the measurements say about why native glimpses lower the
trained heads on the magnetic tiles, and what a design change would have to do."""

from __future__ import annotations

import numpy as np

#: The aggregations the summary table compares across models.
SUMMARY = (
    "overview",
    "agent",
    "agent_zoom1",
    "agent_before_native",
    "agent_max",
    "agent_all_logodds",
    "agent_ov_logodds",
    "agent_keep",
    "mid_ov_max",
    "mid_ov_logodds",
    "acc",
    "keep",
    "alone_ov_logodds",
)


#: Defect classes that cover a small part of a frame, and those that cover a large one.
SMALL = ("blowhole", "break", "crack")
LARGE = ("fray", "uneven")


def _span(ag: dict[str, dict], recs: dict[str, dict], classes: tuple[str, ...]) -> str:
    """The range over models and ``classes`` of the agent's native glimpses on defects."""
    xs = [
        v["on_defect"]
        for n, a in ag.items()
        for c, v in a.items()
        if recs[n]["classes"][c] in classes and v["on_defect"] is not None
    ]
    return f"{min(xs):.0%} to {max(xs):.0%}" if xs else "-"


def _best(rows: dict[str, dict[str, dict]], names: list[str]) -> str:
    """The aggregations with the highest mean recall over the models (ties listed)."""
    from benchmarks.studies.search_controls import tiles_why_report as r

    means = {k: round(_mean(rows[n][k]["recall"] for n in names), 3) for k in r.AGGREGATIONS}
    top = max(means.values())
    return f"{top:.3f}, " + "; ".join(r.AGGREGATIONS[k][0] for k, v in means.items() if v == top)


def _f(v, fmt: str = ".3f") -> str:
    return "-" if v is None or v != v else format(v, fmt)


#: The aggregations whose per-class recall the notes compare.
CLASS_ROWS = ("overview", "agent_zoom1", "agent", "agent_keep", "acc", "keep")


def _class_line(rows: dict, recs: dict[str, dict], names: list[str], key: str) -> str:
    """One aggregation's mean per-class recall and test false alarms over the models."""
    from benchmarks.studies.search_controls import tiles_why_report as r

    classes = recs[names[0]]["classes"][1:]
    by = " / ".join(
        f"{_mean(rows[n][key]['recall_by_class'].get(i + 1) for n in names):.2f}"
        for i in range(len(classes))
    )
    fa = _mean(rows[n][key]["false_alarms"] for n in names)
    return f"- {r.AGGREGATIONS[key][0]}: {by}; false alarms {fa:.3f}"


def _class_drops(rows: dict, recs: dict[str, dict], names: list[str], a: str, b: str) -> str:
    """Per class, mean recall under ``a`` -> under ``b``, the largest drop first."""
    classes = recs[names[0]]["classes"][1:]

    def by(key: str, i: int) -> float:
        return _mean(rows[n][key]["recall_by_class"].get(i + 1) for n in names)

    pairs = [(c, by(a, i), by(b, i)) for i, c in enumerate(classes)]
    pairs.sort(key=lambda x: x[2] - x[1])
    return ", ".join(f"{c} {x:.2f} -> {y:.2f}" for c, x, y in pairs)


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole > 0 else "-"


def _first_zoom(recs: dict[str, dict]) -> float:
    """Share of the test frames (all models) where the agent's first action zooms in."""
    return _mean(
        float(np.mean(rec["test"]["agent_level"][:, 1] == int(rec["levels"]) - 2))
        for rec in recs.values()
    )


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else float("nan")


def summary_table(recs: dict[str, dict]) -> tuple[str, dict[str, dict[str, dict]]]:
    """Recall (test FA) per model and aggregation, the mean over the models, and the
    defective frames gained / lost against the overview, summed over the models."""
    from benchmarks.studies.search_controls import tiles_why_report as r

    rows = {n: {row["key"]: row for row in r.rows_for(rec)} for n, rec in recs.items()}
    names = list(recs)
    head = (
        "| aggregation | "
        + " | ".join(f"{n}: recall (test FA)" for n in names)
        + " | mean recall / AUROC | defective frames gained / lost vs the overview, all"
        " models |\n|---|" + "---|" * (len(names) + 2) + "\n"
    )
    body = ""
    for key in SUMMARY:
        cells, gained, lost = [], 0, 0
        for n in names:
            row, ov = rows[n][key], rows[n]["overview"]
            cells.append(f"{row['recall']:.3f} ({row['false_alarms']:.3f})")
            d = recs[n]["test"]["labels"] != 0
            gained += int((row["flagged"] & ~ov["flagged"] & d).sum())
            lost += int((~row["flagged"] & ov["flagged"] & d).sum())
        words = r.AGGREGATIONS[key][0]
        rec_m = _mean(rows[n][key]["recall"] for n in names)
        auc_m = _mean(rows[n][key]["auroc"] for n in names)
        body += (
            f"| {words} | " + " | ".join(cells) + f" | {rec_m:.3f} / {auc_m:.3f} |"
            f" +{gained} / -{lost} |\n"
        )
    return head + body, rows


def notes(recs: dict[str, dict]) -> list[str]:
    """The summary table and the findings."""
    from benchmarks.studies.search_controls import tiles_why_report as r

    table, rows = summary_table(recs)
    names = list(recs)
    ev = {n: r.glimpse_evidence(rec) for n, rec in recs.items()}
    ag = {n: r.agent_native_evidence(rec) for n, rec in recs.items()}

    def m(key: str) -> float:
        return _mean(e[key] for e in ev.values())

    def mr(key: str, field: str = "recall") -> float:
        return _mean(rows[n][key][field] for n in names)

    # The agent's native glimpses on defective frames: share on defect pixels, pooled.
    on, total = 0.0, 0.0
    drop_def, drop_free = [], []
    for a in ag.values():
        for c, v in a.items():
            if c == 0:
                drop_free.append(v["score_before"] - v["score_decision"])
                continue
            n_nat = v["native_per_frame"] * v["frames"]
            total += n_nat
            on += (v["on_defect"] or 0.0) * n_nat
            drop_def.append(v["score_before"] - v["score_decision"])
    best_before = sum(
        rows[n]["agent_before_native"]["recall"] >= rows[n]["agent"]["recall"] for n in names
    )
    return [
        "Recall at <= 5 % false alarms (threshold on val) per model, and the defective test"
        " frames each aggregation flags that the overview alone does not (+) or misses that"
        " the overview flags (-), summed over the models:",
        "",
        table,
        "Which classes lose (mean recall over the models, blowhole / break / crack / fray /"
        " uneven, and the test false alarms):",
        "",
        *[_class_line(rows, recs, names, k) for k in CLASS_ROWS],
        "",
        "Findings (means over " + ", ".join(names) + "):",
        "",
        "- **Per class, from the agent's first zoom to its own stops:**"
        f" {_class_drops(rows, recs, names, 'agent_zoom1', 'agent')}; test false"
        f" alarms {mr('agent_zoom1', 'false_alarms'):.3f} -> {mr('agent', 'false_alarms'):.3f}."
        " The threshold on val holds the false alarms near 5 %, so the loss shows as"
        " recall, class by class, not as extra false alarms.",
        "- **A native glimpse carries next to no local evidence for these heads.** Alone"
        " after the overview, a random native glimpse on a defective frame scores"
        f" {m('alone_defect_on'):.3f} when it holds defect pixels and {m('alone_defect_off'):.3f}"
        f" when it does not; the defective frames' overview alone scores {m('ov_defect'):.3f}."
        " The heads read the part's class from the overview (an input of every"
        " observation) and the native glimpse moves that little whether or not the defect"
        f" is in it; the best-placed native glimpse (the oracle) lifts the score to"
        f" {m('oracle_defect'):.3f}, above the overview's on"
        f" {m('oracle_above_ov'):.0%} of the defective frames: a small gain that needs the"
        " defect found first.",
        "- **Fixed scans lose on the free frames (false alarms), and the memory is part of"
        " it.** A free frame's mean defect score is"
        f" {m('ov_free'):.3f} on the overview, {m('alone_free'):.3f} with one native glimpse,"
        f" {m('acc_last_free'):.3f} after {r.K_NATIVE} random native glimpses in a row, while"
        f" the defective frames' stays near {m('acc_last_defect'):.3f}: the threshold for 5 %"
        " false alarms must rise and recall falls"
        f" ({mr('overview'):.3f} -> {mr('acc'):.3f}). Holding the overview's glimpse in the"
        " memory's last slot (the 4-slot memory otherwise pushes it out after the fourth"
        f" glimpse) brings the free frames back to {m('keep_last_free'):.3f} and recall to"
        f" {mr('keep'):.3f} (AUROC {mr('acc', 'auroc'):.3f} -> {mr('keep', 'auroc'):.3f}):"
        " about the part of the loss the memory explains; the rest is the run of native"
        " glimpses itself, an observation (native after native, no zoom path, most of"
        " the seen map empty) unlike the agents' episodes the heads learned from.",
        "- **The agent's own native glimpses miss the defects, and its defect scores"
        " fall.** Of the agents' native glimpses on defective test frames,"
        f" {on / total if total else 0:.0%} hold defect pixels (per model and class in the"
        f" table above: {_span(ag, recs, SMALL)} on the small blowholes, breaks and cracks,"
        f" {_span(ag, recs, LARGE)} on the large fray and uneven areas). From just before"
        " its first"
        " native glimpse to its decision the defect score falls by"
        f" {_mean(drop_def):.3f} on the defective frames and {_mean(drop_free):.3f} on the"
        " free ones: after the agent's zoom path the verdict reads the part from native"
        " patches that mostly show clean surface, and a defect elsewhere is forgotten.",
        "- **The memory and the agent.** Read along the agent's own trajectory with the"
        " overview's glimpse kept in the memory, its decisions give a mean recall of"
        f" {mr('agent_keep'):.3f} (test false alarms {mr('agent_keep', 'false_alarms'):.3f})"
        f" against {mr('agent'):.3f} ({mr('agent', 'false_alarms'):.3f}) as it is: "
        f"{_share(mr('agent_keep') - mr('agent'), mr('agent_zoom1') - mr('agent'))} of the"
        " gap to its first zoom's"
        f" {mr('agent_zoom1'):.3f}, by model: "
        + ", ".join(
            f"{n} {rows[n]['agent']['recall']:.3f} -> {rows[n]['agent_keep']['recall']:.3f}"
            for n in names
        )
        + ". The rest is the native glimpses' own evidence.",
        "- **The middle level carries no more local evidence.** A middle-level tile alone"
        " on a defective frame scores"
        f" {_f(m('mid_defect_on'))} on the defect and {_f(m('mid_defect_off'))} off it"
        f" ({m('mid_free'):.3f} on a free frame); the frame's whole middle-level tiling"
        f" ({min(int(r_['test']['mid_n'].min()) for r_ in recs.values())} to"
        f" {max(int(r_['test']['mid_n'].max()) for r_ in recs.values())} tiles) pooled with"
        " the overview by max reaches a mean recall of"
        f" {mr('mid_ov_max'):.3f}, by mean log-odds {mr('mid_ov_logodds'):.3f}, against"
        f" {mr('overview'):.3f} for the overview alone, and the best-placed middle-level"
        f" viewport scores {m('mid_oracle'):.3f}. So the gain after the agent's first"
        f" action (recall {mr('agent_zoom1'):.3f}) is not local evidence a scan could"
        " collect elsewhere: that action is a zoom at the frame's centre in"
        f" {_first_zoom(recs):.0%} of the test frames, the observation every training"
        " episode began with, and no learned where-to-look enters it.",
        "- **What works on the trained heads:** the agent stopped before its first native"
        f" glimpse (recall {mr('agent_before_native'):.3f} against {mr('agent'):.3f} at its"
        f" own stops and {mr('overview'):.3f} on the overview alone; at least as high as its"
        f" own stops in {best_before} of {len(names)} models), or the mean log-odds over"
        f" all its observations ({mr('agent_all_logodds'):.3f}), which keeps the overview's"
        " and the zoom's evidence. Combining the overview with random native glimpses"
        f" read alone ({mr('alone_ov_logodds'):.3f}) does not beat the overview: the"
        " glimpses add nothing to combine. The highest mean recall of the aggregations"
        f" tried: {_best(rows, names)}.",
        "",
        "What this says for the design (no retraining here, so these are recommendations"
        " to confirm, not results): on this footage the heads' separability comes from the"
        " overview and the first zoom, and native glimpses placed by anyone (the fixed"
        " scans or the agent) take it away rather than add to it, because the native"
        " evidence the heads learned is not local (a glimpse on the defect scores as one"
        " beside it) and the 4-slot memory forgets the overview's glimpse after four more."
        " Two changes follow. (1) For footage, take"
        " the verdict after the agent's first zoom, before any native glimpse (a"
        " stop-before-native rule in the agent loop, or a scan whose deepest level is"
        " today's middle one: no profile setting gives that now, the deepest level is"
        " always the glimpse size in frame pixels): cut after its first action the agent"
        f" reaches a mean recall of {mr('agent_zoom1'):.3f} (AUROC"
        f" {mr('agent_zoom1', 'auroc'):.3f}), stopped just before its first native glimpse"
        f" {mr('agent_before_native'):.3f}, against {mr('agent'):.3f} at its own stops and"
        f" {mr('overview'):.3f} on the"
        " overview alone, with no native pixel. (2) For native glimpses"
        " to earn their keep, the verdict must keep the overview's evidence and read a"
        " glimpse as local evidence: a per-glimpse defect head pooled with the overview's"
        " score (noisy-or or max, as a tiling classifier pools its tiles), trained on"
        " native crops labelled by whether they hold defect pixels (the footage's masks"
        " give them), instead of one verdict over a 4-slot memory. Confirming (1) needs no"
        " retraining on other runs: rerun this record on the seed 1 and 2 runs of the same"
        " recipe (`python -m benchmarks.studies.search_controls.tiles_why --run RUN`) and"
        " on the station's loop once the rule is in it; making the agent itself stop there"
        " needs retraining with the rule (or a reward that no longer pays native"
        " focus on footage), `train --preset footage --members 4 --seed S` for seeds 0 to 2,"
        " scored by section 1b. (2) needs the new head and its training, then this"
        " section's aggregations on it."
        " Neither was run in this session.",
        "",
    ]
