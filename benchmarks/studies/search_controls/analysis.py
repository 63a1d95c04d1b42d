"""Score the drivers: recall at <= 5 % false alarms (operating point chosen on val),
defect AUROC and accuracy, against mean glimpses and pixel fraction.

The defect score of a part is ``1 - p(ok)`` at its decision. The threshold is put on the
val parts so that at most ``fa`` of the val ok parts score above it (the midpoint
between two neighbouring val scores), then applied to the test parts. Accuracy is the
profile's decision rule (expected outcome reward, ok bias 0), as the station decides.
"""

from __future__ import annotations

import numpy as np

from benchmarks.studies.search_controls.drivers import FIXED, max_pooled

FA_CEILING = 0.05


def threshold_at(ok_scores: np.ndarray, fa: float = FA_CEILING) -> float:
    """The lowest threshold with at most ``fa`` of ``ok_scores`` above it."""
    s = np.sort(np.asarray(ok_scores, dtype=np.float64))[::-1]
    allowed = int(np.floor(fa * len(s) + 1e-9))
    if allowed >= len(s):
        return float(s[-1]) - 1e-9
    hi = s[allowed - 1] if allowed > 0 else np.inf
    lo = s[allowed]
    # Ties at the boundary: above every tied score (never more than fa on val).
    while allowed > 0 and hi <= lo:
        allowed -= 1
        hi = s[allowed - 1] if allowed > 0 else np.inf
    return float(lo + (hi - lo) / 2) if np.isfinite(hi) else float(lo) + 1e-9


def score(val: tuple, test: tuple, outcome_matrix: np.ndarray, fa: float = FA_CEILING) -> dict:
    """Figures of one driver at one k.

    :param val: (probs [N, C], labels [N]) of the val parts; ``test`` likewise.
    """
    from inspector.policy.operating_point import defect_auroc, verdicts_at

    (pv, yv), (pt, yt) = val, test
    thr = threshold_at(1.0 - pv[yv == 0, 0], fa)
    st = 1.0 - pt[:, 0]
    defect, ok = yt != 0, yt == 0
    flagged = st > thr
    verdicts = verdicts_at(pt, outcome_matrix, np.array([0.0]))[0]
    per_class = {
        int(c): float(flagged[yt == c].mean()) for c in np.unique(yt[defect]) if (yt == c).any()
    }
    return {
        "threshold": thr,
        "recall": float(flagged[defect].mean()) if defect.any() else None,
        "false_alarms": float(flagged[ok].mean()) if ok.any() else None,
        "recall_by_class": per_class,
        "auroc": defect_auroc(pt, list(defect)),
        "accuracy": float((verdicts == yt).mean()),
        "n_defect": int(defect.sum()),
        "n_ok": int(ok.sum()),
    }


def _pooled(probs: np.ndarray) -> np.ndarray:
    return np.stack([max_pooled(p) for p in probs])


class _Rows(list):
    """The rows of :func:`curves`, scored against one val/test pair."""

    def __init__(self, val: dict, test: dict, outcome_matrix: np.ndarray, fa: float) -> None:
        super().__init__()
        self.val, self.test, self.matrix, self.fa = val, test, outcome_matrix, fa

    def add(self, driver: str, k: int, pv: np.ndarray, pt: np.ndarray, part: dict, col=None):
        g = part["glimpses"] if col is None else part["glimpses"][:, col]
        f = part["pixel_fraction"] if col is None else part["pixel_fraction"][:, col]
        val, test = (pv, self.val["labels"]), (pt, self.test["labels"])
        r = score(val, test, self.matrix, self.fa)
        row = {"driver": driver, "k": k, "glimpses": float(np.mean(g))}
        self.append({**row, "pixel_fraction": float(np.mean(f)), **r})
        return self[-1]


def curves(val: dict, test: dict, outcome_matrix: np.ndarray, fa: float = FA_CEILING) -> list[dict]:
    """One row per (driver, k) from :func:`.drivers.drive`'s output on val and test.

    Drivers: ``overview``; ``raster`` and ``random`` (verdict head at the last glimpse)
    and ``raster max`` / ``random max`` (the glimpse with the highest defect score so far,
    a detector's max-pooling); ``tiling`` and ``tiling max``; ``tiling stop`` (the
    tiles with a confidence stop, :func:`tiling_stop`); ``agent`` (its own
    stops) and ``agent cap`` (its trajectory cut after b actions). Without the fixed
    drivers in the output (``drive(fixed=False)``), the agent's rows alone.
    """
    rows = _Rows(val, test, outcome_matrix, fa)
    if "raster" in test:
        ov, ot = val["raster"]["probs"][:, 0], test["raster"]["probs"][:, 0]
        rows.add("overview", 0, ov, ot, test["raster"], 0)
        for d in (d for d in FIXED if d in test):  # the footage has no walk
            pv, pt = val[d]["probs"], test[d]["probs"]
            mv, mt = _pooled(pv), _pooled(pt)
            for k in range(1, pt.shape[1]):
                rows.add(d, k, pv[:, k], pt[:, k], test[d], k)
                rows.add(f"{d} max", k, mv[:, k], mt[:, k], test[d], k)
        tv, tt = val["tiling"], test["tiling"]
        k_tiles = int(np.median(test["tiles"]))
        rows.add("tiling", k_tiles, tv["last"], tt["last"], tt)
        rows.add("tiling max", k_tiles, tv["max"], tt["max"], tt)
        # Tiles in the raster's order with a confidence stop: the operating point of the
        # max over the tiles (on val), stopping at the first observation past it.
        thr = threshold_at(1.0 - tv["max"][val["labels"] == 0, 0], fa)
        stop = tiling_stop(test["raster"], test["tiles"], thr)
        row = rows.add("tiling stop", k_tiles, tv["max"], stop["probs"], stop)
        y = test["labels"]
        row["glimpses_by_class"] = {
            int(c): float(stop["glimpses"][y == c].mean()) for c in np.unique(y)
        }
    av, at = val["agent"]["probs"], test["agent"]["probs"]
    agent = rows.add("agent", -1, av[:, -1], at[:, -1], test["agent"], -1)
    stop = test["agent"]["stop"]
    agent["steps"] = float(np.mean(np.where(stop >= 0, stop + 1, at.shape[1] - 1)))
    agent["stopped"] = float(np.mean(stop >= 0))
    g, y = test["agent"]["glimpses"][:, -1], test["labels"]
    agent["glimpses_by_class"] = {int(c): float(g[y == c].mean()) for c in np.unique(y)}
    # Capped at b actions: the padded arrays hold the decision where it came earlier.
    for b in range(1, at.shape[1] - 1):
        rows.add("agent cap", b, av[:, b], at[:, b], test["agent"], b)
    return list(rows)


def tiling_stop(part: dict, tiles: np.ndarray, threshold: float) -> dict:
    """The tiling with a confidence stop, from a raster scan's per-glimpse probabilities.

    The raster's first ``tiles`` positions are the exhaustive tiling, so its
    probabilities after the overview and each tile are the tiling's. A part stops at
    the first observation (the overview included) whose defect score ``1 - p(ok)``
    passes ``threshold`` and is decided there; a part that never passes it sees every
    tile and is decided on its last observation (which remembers the tiles; none of
    them passed). Flagged parts are then exactly those the tiling's max flags at
    ``threshold``; the glimpses spent and the verdicts of unflagged parts differ.

    :param part: a fixed driver's arrays (``probs`` [N, K+1, C], ``glimpses``,
        ``pixel_fraction`` [N, K+1]).
    :param tiles: [N] tiles per part.
    :returns: ``probs`` [N, C] at the decision, ``glimpses`` and ``pixel_fraction`` [N],
        ``stopped_at`` [N] (glimpse index of the stop, -1: none).
    """
    probs, g, f = part["probs"], part["glimpses"], part["pixel_fraction"]
    out: dict[str, list] = {"probs": [], "glimpses": [], "pixel_fraction": [], "stopped_at": []}
    for i in range(len(probs)):
        n = min(int(tiles[i]), probs.shape[1] - 1)
        hit = np.flatnonzero(1.0 - probs[i, : n + 1, 0] > threshold)
        t = int(hit[0]) if hit.size else n
        out["probs"].append(probs[i, t])
        out["glimpses"].append(g[i, t])
        out["pixel_fraction"].append(f[i, t])
        out["stopped_at"].append(t if hit.size else -1)
    return {k: np.asarray(v) for k, v in out.items()}


def interpolate(
    rows: list[dict], driver: str, x: float, key: str = "recall", on: str = "glimpses"
) -> float | None:
    """``key`` of ``driver`` linearly interpolated at ``on`` = x (None outside its range)."""
    pts = sorted((r[on], r[key]) for r in rows if r["driver"] == driver and r[key] is not None)
    if not pts or x < pts[0][0] or x > pts[-1][0]:
        return None
    return float(np.interp(x, [p[0] for p in pts], [p[1] for p in pts]))


def glimpses_for(rows: list[dict], driver: str, level: float, key: str = "recall") -> float | None:
    """The fewest mean glimpses at which ``driver`` reaches ``key`` >= ``level``
    (linear between its points; None when it never does)."""
    pts = sorted(
        (r["glimpses"], r[key]) for r in rows if r["driver"] == driver and r[key] is not None
    )
    prev = None
    for g, v in pts:
        if v >= level:
            if prev is None or prev[1] >= v:
                return float(g)
            g0, v0 = prev
            return float(g0 + (level - v0) * (g - g0) / (v - v0))
        prev = (g, v)
    return None


def dominance(rows: list[dict], base: str = "raster", who: str = "agent") -> dict:
    """The issue's goal for one seed: does the agent (or driver ``who``) beat ``base`` at
    equal glimpses, or match it with at most half the glimpses?

    A recall difference within two binomial standard errors of the agent's recall on
    these test parts is called a tie (``within_noise``): 300 parts hold ~200 defective
    ones, so one part moves recall by ~0.005.
    """
    agent = next(r for r in rows if r["driver"] == who)
    at_equal = interpolate(rows, base, agent["glimpses"])
    needed = glimpses_for(rows, base, agent["recall"])
    n, p = agent.get("n_defect"), agent["recall"]
    noise = 2 * float(np.sqrt(max(p * (1 - p), 1.0 / n) / n)) if n else None
    higher = at_equal is not None and p > at_equal
    return {
        "agent_glimpses": agent["glimpses"],
        "agent_recall": p,
        f"{base}_recall_at_equal": at_equal,
        f"{base}_glimpses_for_agent_recall": needed,
        "higher_at_equal": higher,
        "half_the_glimpses": needed is not None and agent["glimpses"] <= needed / 2,
        "noise": noise,
        "within_noise": None not in (at_equal, noise) and abs(p - at_equal) <= noise,
        "defect_parts": agent.get("n_defect"),
    }


def mean_rows(per_seed: list[list[dict]]) -> list[dict]:
    """(driver, k) rows averaged over seeds, with the seeds' recall range."""
    groups: dict[tuple, list[dict]] = {}
    for rows in per_seed:
        for r in rows:
            groups.setdefault((r["driver"], r["k"]), []).append(r)
    out = []
    for (driver, k), rs in groups.items():
        row = {"driver": driver, "k": k, "seeds": len(rs)}
        for key in ("glimpses", "pixel_fraction", "recall", "false_alarms", "auroc", "accuracy"):
            vals = [r[key] for r in rs if r.get(key) is not None]
            row[key] = float(np.mean(vals)) if vals else None
            if key == "recall" and vals:
                row["recall_range"] = (float(min(vals)), float(max(vals)))
        classes = {c for r in rs for c in r["recall_by_class"]}
        row["recall_by_class"] = {
            c: float(np.mean([r["recall_by_class"][c] for r in rs if c in r["recall_by_class"]]))
            for c in sorted(classes)
        }
        out.append(row)
    return out
