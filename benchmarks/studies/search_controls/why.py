"""Section 4 of the issue: why the learned search does not beat the fixed scan here, and
the design change the measurements point to, written from the seeds' mean rows."""

from __future__ import annotations


def _f(v, fmt: str = ".3f") -> str:
    return "-" if v is None else format(v, fmt)


def _row(mean: list[dict], driver: str) -> dict | None:
    rs = [r for r in mean if r["driver"] == driver]
    return max(rs, key=lambda r: r["k"]) if rs else None


def why_notes(mean: list[dict]) -> list[str]:
    """What the overview tells about points, what full cover costs each way, what the
    agent spends, and what a tiling with a confidence stop reaches with the same heads."""
    from benchmarks.studies.search_controls import analysis

    ov, tiles, agent = _row(mean, "overview"), _row(mean, "tiling"), _row(mean, "agent")
    walk = [r for r in mean if r["driver"] == "walk max"]
    if not (ov and tiles and agent and walk):
        return []
    point = {int(k): v for k, v in ov["recall_by_class"].items()}.get(2)
    best_walk = max(walk, key=lambda r: (round(r["recall"] or 0, 3), -r["glimpses"]))
    out = [
        "Why the learned search does not beat the fixed scan on this task (section 4 of"
        " the issue; measured on the trained models, no retraining):",
        "",
        f"- The overview says nothing about where a point is: from the overview alone the"
        f" heads find {_f(point, '.2f')} of the point parts at the operating point (the task"
        " caps a point's contrast so that it vanishes at overview resolution). A searcher"
        " for points can only cover the frame; the quickest cover is the tiling:"
        f" {tiles['k']} native tiles, {tiles['glimpses']:.2f} glimpses with the overview,"
        f" recall {_f(tiles['recall'])}.",
        f"- The agent's actions move half a viewport: the fixed walk through them needs"
        f" {best_walk['glimpses']:.2f} glimpses for its best recall ({_f(best_walk['recall'])},"
        " max over its glimpses). The learned agent covers what it needs in"
        f" {agent['glimpses']:.2f} glimpses (recall {_f(agent['recall'])}): it learned where"
        " to look well enough to make up for its action set, not enough to beat jumps it"
        " does not have. On ok parts it spends the most (the per-class glimpses above): an"
        " ok verdict needs the whole cover, which its moves make long.",
    ]
    stop = _row(mean, "tiling stop")
    if stop:
        raster_eq = analysis.interpolate(mean, "raster", stop["glimpses"])
        out += [
            "- What a searcher can gain over the tiling here is stopping early: at once where"
            " the overview shows a line, on a point part once the point is in sight; an ok"
            " part always needs the whole cover. The tiling with a confidence stop takes"
            " exactly that with the same heads and no learning (tiles in raster order, stop"
            " at the first observation whose defect score passes the val operating point of"
            " the max over the tiles, so it flags the parts that max flags; a part that never"
            " passes it is decided on its last observation):"
            f" {stop['glimpses']:.2f} glimpses, recall {_f(stop['recall'])}, test false alarms"
            f" {_f(stop['false_alarms'])}, against the agent's {agent['glimpses']:.2f}"
            f" glimpses and recall {_f(agent['recall'])}, and the raster's recall"
            f" {_f(raster_eq)} at {stop['glimpses']:.2f} glimpses.",
            "",
            "The design change this points to: give the searcher a"
            " *jump to tile k* action over the native tiles of the frame (beside or in place"
            " of the half-viewport moves) and keep the stop decision on the verdict head's"
            " defect score at the operating point. The tiling's cost is then the worst case"
            " of every search, the stop takes the early-out on defective parts, and what is"
            " left to learn is the order of the tiles, scored from the overview. On this"
            " task that order cannot be learned (the overview does not show points), so the"
            " row above is the ceiling a learned order could reach here; on footage where"
            " the overview ranks tiles, a learned order would add to it, which the"
            " magnetic-tile controls would have to show. Built since in the product (a"
            " profile's `scan.actions: tiles`, the station's `model.stop_on_defect`) and"
            ' trained as arm `jump`: see the next section, "A searcher that jumps".',
        ]
    return out + [""]
