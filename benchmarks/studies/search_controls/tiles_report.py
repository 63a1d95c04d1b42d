"""Section 1b's tables, plot and verdicts from the saved footage evaluations (:mod:`.tiles`)."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.harness import table
from benchmarks.studies.search_controls import analysis
from benchmarks.studies.search_controls.report import DRIVER_WORDS, _f, driver_row

#: Glimpse counts of the fixed scans shown in the table (the plot shows every k).
SHOWN_K = (1, 2, 3, 4, 6, 8, 12, 15, 24, 32, 48, 64, 96, 128, 192)
SHOWN_CAPS = (1, 2, 4, 6, 8, 10, 12, 15)
#: The models averaged in the table and plot: the ensemble's heads are the members'.
MEAN_OVER = ("student", "m0", "m1", "m2", "m3")
#: The fixed scans each model's agent and tiling stop are judged against.
BASES = ("raster", "raster max", "random max")
ORDER = (
    "overview",
    "raster",
    "raster max",
    "random",
    "random max",
    "tiling",
    "tiling max",
    "tiling stop",
    "agent",
    "agent cap",
)


def _shown(r: dict, last: dict[str, int]) -> bool:
    d, k = r["driver"], r["k"]
    if d == "agent cap":
        return k in SHOWN_CAPS
    if d in ("raster", "raster max", "random", "random max"):
        return k in SHOWN_K or k == last[d]
    return True


def mean_table(mean: list[dict], classes: list[str]) -> str:
    """The drivers averaged over the models (``seeds`` = models)."""
    last = {}
    for r in mean:
        last[r["driver"]] = max(last.get(r["driver"], 0), r["k"])
    rows = []
    for r in sorted(mean, key=lambda r: (ORDER.index(r["driver"]), r["k"])):
        if not _shown(r, last):
            continue
        rows.append(driver_row(r, DRIVER_WORDS, ".3f", classes))
    header = [
        "driver",
        "k / b",
        "models",
        "mean glimpses",
        "pixel fraction",
        f"recall at <= {analysis.FA_CEILING:.0%} FA (models' range)",
        "test false alarms",
        "recall " + " / ".join(classes[1:]),
        "defect AUROC",
        "accuracy",
    ]
    return table(header, rows)


def _row(rows: list[dict], driver: str) -> dict | None:
    return next((r for r in rows if r["driver"] == driver), None)


def model_table(evals: dict[str, dict]) -> str:
    """Per model: the agent beside the raster (max) at its glimpses and at its pixels,
    the overview alone, the tiling and the tiling with a confidence stop."""
    rows = []
    for name, ev in evals.items():
        rs = ev["rows"]
        a, ov = _row(rs, "agent"), _row(rs, "overview")
        stop, tmax = _row(rs, "tiling stop"), _row(rs, "tiling max")

        def at(key, on, x, rs=rs):
            return analysis.interpolate(rs, "raster max", x, key=key, on=on)

        rows.append(
            [
                name,
                f"{a['glimpses']:.2f} / {a['pixel_fraction']:.3f}",
                f"{_f(a['recall'])} / {_f(a['auroc'])}",
                f"{_f(at('recall', 'glimpses', a['glimpses']))}"
                f" / {_f(at('auroc', 'glimpses', a['glimpses']))}",
                _f(at("recall", "pixel_fraction", a["pixel_fraction"])),
                f"{_f(ov['recall'])} / {_f(ov['auroc'])}",
                f"{stop['glimpses']:.1f}: {_f(stop['recall'])}",
                f"{tmax['glimpses']:.1f}: {_f(tmax['recall'])} / {_f(tmax['auroc'])}",
                f"{a.get('stopped', 0):.0%}",
            ]
        )
    header = [
        "model",
        "agent: glimpses / pixel fraction",
        "agent: recall / AUROC",
        "raster (max) at the agent's glimpses: recall / AUROC",
        "raster (max) at the agent's pixel fraction: recall",
        "overview alone: recall / AUROC",
        "tiling stop: glimpses: recall",
        "tiling (max): glimpses: recall / AUROC",
        "agent stopped itself",
    ]
    return table(header, rows)


def verdict(rows: list[dict], base: str, who: str = "agent") -> tuple[str, dict]:
    """beats / ties / loses to ``base`` at equal glimpses (:func:`.analysis.dominance`)."""
    d = analysis.dominance(rows, base, who)
    eq = d[f"{base}_recall_at_equal"]
    if d["half_the_glimpses"]:
        return "**beats** (at most half the glimpses for its recall)", d
    if eq is None:
        return "cannot be set beside (outside the scan's glimpses)", d
    if d["within_noise"]:
        return f"ties with (within +-{d['noise']:.3f}, two standard errors)", d
    if d["higher_at_equal"]:
        return "**beats** (higher recall at equal glimpses)", d
    return f"**loses to** (lower by more than {d['noise']:.3f}, two standard errors)", d


def verdict_notes(evals: dict[str, dict], who: str = "agent") -> list[str]:
    """One line per model and fixed scan."""
    out = []
    for name, ev in evals.items():
        for base in BASES if who == "agent" else ("raster max",):
            if not any(r["driver"] == base for r in ev["rows"]):
                continue
            words, d = verdict(ev["rows"], base, who)
            need = d[f"{base}_glimpses_for_agent_recall"]
            out.append(
                f"- {name}: {'the agent' if who == 'agent' else who}"
                f" ({d['agent_glimpses']:.2f} glimpses, recall {d['agent_recall']:.3f})"
                f" {words} the {DRIVER_WORDS[base]}: recall at equal glimpses"
                f" {_f(d[f'{base}_recall_at_equal'])}; glimpses the scan needs for that"
                f" recall {_f(need, '.2f')}."
            )
    return out


def look_notes(evals: dict[str, dict]) -> list[str]:
    """Where each agent spends its glimpses, per true class (test frames)."""
    out = []
    for name, ev in evals.items():
        a, classes = _row(ev["rows"], "agent"), ev["classes"]
        by = {int(k): v for k, v in (a.get("glimpses_by_class") or {}).items()}
        out.append(
            f"- {name}: "
            + ", ".join(f"{c} {by[i]:.1f}" for i, c in enumerate(classes) if i in by)
            + f" glimpses; {a.get('steps', 0):.1f} actions per frame."
        )
    return out


def _at(rows: list[dict], driver: str, k: int | None = None) -> dict | None:
    return next((r for r in rows if r["driver"] == driver and (k is None or r["k"] == k)), None)


def overview_notes(evals: dict[str, dict]) -> list[str]:
    """Per model: the agent beside the overview alone (the same heads, no glimpse) and
    beside its own trajectory cut after one action; the last line counts them."""
    out, tally, cut = [], {}, [0, 0]
    for name, ev in evals.items():
        rs = ev["rows"]
        a, ov, one = _at(rs, "agent"), _at(rs, "overview"), _at(rs, "agent cap", 1)
        noise = analysis.dominance(rs, "raster", "agent")["noise"]
        diff = a["recall"] - ov["recall"]
        words = (
            "a tie"
            if abs(diff) <= noise
            else ("the agent ahead" if diff > 0 else "the overview ahead")
        )
        tally[words] = tally.get(words, 0) + 1
        cut[0] += one["recall"] > a["recall"]
        cut[1] += one["recall"] - a["recall"] > noise
        out.append(
            f"- {name}: the agent {_f(a['recall'])} recall / {_f(a['auroc'])} AUROC in"
            f" {a['glimpses']:.2f} glimpses, the overview alone {_f(ov['recall'])} /"
            f" {_f(ov['auroc'])} ({diff:+.3f} recall, two standard errors +-{noise:.3f}:"
            f" {words}); the agent stopped after its first action"
            f" ({one['glimpses']:.2f} glimpses, pixel fraction {one['pixel_fraction']:.3f})"
            f" {_f(one['recall'])} / {_f(one['auroc'])}."
        )
    return [
        *out,
        "",
        "Against the overview alone: "
        + ", ".join(f"{words} in {n} model{'s' if n > 1 else ''}" for words, n in tally.items())
        + f". The agent stopped after its first action (a zoom: no native pixel yet) has"
        f" a higher recall than with its own stops in {cut[0]} of {len(evals)} models,"
        f" by more than two standard errors in {cut[1]}.",
    ]


def heads_note(mean: list[dict], budget: int) -> list[str]:
    """How the heads' figures move as native glimpses are added, by a fixed scan and by
    the agent itself (mean rows)."""
    ov, r1 = _at(mean, "overview"), _at(mean, "raster", 1)
    rb, tmax = _at(mean, "raster max", budget - 1), _at(mean, "tiling max")
    one, agent = _at(mean, "agent cap", 1), _at(mean, "agent")
    if None in (ov, r1, rb, tmax, one, agent):
        return []
    return [
        "The same heads as native glimpses are added (means over the models): defect AUROC"
        f" {_f(ov['auroc'])} on the overview alone, {_f(r1['auroc'])} after the raster's"
        f" first native glimpse (the frame's top-left tile), {_f(rb['auroc'])} max-pooled"
        f" over its first {budget - 1} (the agent's budget less one),"
        f" {_f(tmax['auroc'])} max-pooled over the whole tiling ({tmax['glimpses']:.0f}"
        f" glimpses); accuracy (no bias) {_f(ov['accuracy'])} on the overview,"
        f" {_f(r1['accuracy'])} after that first tile. The agent's own native glimpses"
        f" lower them too, less on average: recall {_f(one['recall'])} / AUROC"
        f" {_f(one['auroc'])} after its first zoom (no native pixel),"
        f" {_f(agent['recall'])} / {_f(agent['auroc'])} at its own stops (pixel fraction"
        f" {agent['pixel_fraction']:.3f}). These heads learned"
        " from the observations of their own agents' episodes (the members after perception"
        " pretraining on 8,000 crops and cloning the scripted teacher; the student by"
        " distillation from the members' ensemble) and get their separability from the"
        " overview and the first zoom; native glimpses, most of all those a fixed scan"
        " places without looking at the overview, take it away rather than add to it. A"
        " fixed scan of these heads is no tiling classifier (the quality section above"
        " measures one trained on tiles), and the agent's wins over the fixed scans measure"
        " how much less its glimpses mislead the heads, not a better order of useful"
        " evidence.",
        "",
    ]


def tally(evals: dict[str, dict], base: str = "raster") -> dict[str, int]:
    """How many models' agents beat / tie / lose to ``base`` (words as :func:`verdict`)."""
    out: dict[str, int] = {}
    for ev in evals.values():
        words = verdict(ev["rows"], base)[0]
        key = next(k for k in ("beats", "ties", "loses", "cannot") if k in words)
        out[key] = out.get(key, 0) + 1
    return out


def command(evals: dict[str, dict]) -> str:
    """The command that reproduces the saved evaluations."""
    cfg = next(iter(evals.values()))["benchmark"]["config"]
    names = ",".join(evals)
    cmd = "python -m benchmarks.studies.search_controls --sections tiles"
    cmd += f" --tiles-models {names}" + (" --quick" if cfg["mode"] == "quick" else "")
    if cfg.get("limit"):
        cmd += f" --tiles-frames {cfg['limit']}"
    if cfg.get("raster_max"):
        cmd += f" --tiles-glimpses {cfg['raster_max']}"
    return cmd + " --tiles-run RUN"


def section(evals: dict[str, dict], png_dir: Path) -> list[str]:
    """Section 1b, or nothing when no footage evaluation is saved."""
    if not evals:
        return []
    from benchmarks.studies.search_controls import tiles_plot

    first = next(iter(evals.values()))
    classes = first["classes"]
    pool = {n: e for n, e in evals.items() if n in MEAN_OVER} or evals
    mean = analysis.mean_rows([e["rows"] for e in pool.values()])
    png = png_dir / "search_controls_tiles.png"
    tiles_plot.plot(mean, png, f"Magnetic tiles: {', '.join(pool)} under each driver (mean)")
    fr, t = first["frames"], first["tiles"]
    n_val, n_test = sum(fr["val"].values()), sum(fr["test"].values())
    stamps = sorted(e.get("measured", "") for e in evals.values())
    cfg = first["benchmark"]["config"]
    return [
        "### 1b. Controls at equal glimpses (magnetic tiles)",
        "",
        f"Command: `{command(evals)}`, RUN the folder of `python main.py train --profile"
        " reward_profiles/magnetic_tile.yaml --camera folder --param path=FOOTAGE --param"
        " manifest=splits.csv --param split=train --preset footage --members 4 --seed 0`"
        " (runs/members_cost/tiles_m4_s0 of the members_cost section; read, not trained"
        f" here). Measured {stamps[0]} to {stamps[-1]}, one process, one torch thread.",
        "",
        f"Models: {', '.join(evals)} of that run (the four members differ in their seed; the"
        " student is distilled from their ensemble; the ensemble moves as m0 and decides by"
        " the members' joint verdict). Each model's own perception and verdict heads are"
        " driven by every driver on the same frames: the val split"
        f" ({n_val} frames, {fr['val'][classes[0]]} {classes[0]}) chooses the operating"
        " point (defect score 1 - p(free) for <= 5 % false alarms on val), the test split"
        f" ({n_test} frames, {n_test - fr['test'][classes[0]]} defective) is reported. A"
        f" native viewport is 32 x 32 frame pixels; a test frame holds {t['min']} to"
        f" {t['max']} of them (median {t['median']:.0f}), against 4 on the quadrants"
        " panels, so the raster is run to each frame's whole tiling (its end is the"
        " exhaustive tiling; a frame with fewer tiles than k keeps its last decision), the"
        f" random scan to {cfg['random_max']} glimpses, the agent within its step budget of"
        f" {first['step_budget']}. Glimpses count the overview (and the agent's zoomed-out"
        " glimpses on its way to native); pixel fraction = native pixels examined / frame"
        " pixels. The walk through the agent's own moves is left out here: its"
        " half-viewport moves are 16 pixels, so its budget goes on reaching a corner."
        f" Table and plot: means over {', '.join(pool)}; accuracy is the profile's"
        " expected-reward verdict with no bias.",
        "",
        mean_table(mean, classes),
        f"![controls at equal glimpses, magnetic tiles]({png.name})",
        "",
        "Per model (test frames; the raster (max) interpolated at the agent's mean glimpses"
        " and at its pixel fraction):",
        "",
        model_table(evals),
        "The issue's goal per model (as for the quadrants: beats = higher recall at equal"
        " glimpses by more than two standard errors of the agent's recall on the"
        f" {n_test - fr['test'][classes[0]]} defective test frames, or the scan needs twice"
        " the agent's glimpses for its recall; loses = lower by more than that). Models"
        " counted by their agent's verdict: "
        + "; ".join(
            f"{DRIVER_WORDS[b]}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(tally(evals, b).items()))
            for b in BASES
        )
        + ".",
        "",
        *verdict_notes(evals),
        *verdict_notes(evals, "tiling stop"),
        "",
        "The agent beside the overview alone, with the same heads (test frames):",
        "",
        *overview_notes(evals),
        "",
        *heads_note(mean, first["step_budget"]),
        "Where the agents look (mean glimpses per test frame, by true class):",
        "",
        *look_notes(evals),
        "",
    ]


def current_command(doc: Path, name: str = "search_controls") -> str | None:
    """The ``Command:`` of section ``name`` as it stands in ``doc`` (kept when only the
    footage section is rerun), or None."""
    from benchmarks.harness import section_pattern

    if not doc.is_file():
        return None
    m = section_pattern(name).search(doc.read_text())
    found = re.search(r"^Command: `(.*)`", m.group(0), re.M) if m else None
    return found.group(1) if found else None
