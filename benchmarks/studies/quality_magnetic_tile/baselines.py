"""The two baselines: exhaustive tiling and a full-frame CNN, trained within a budget."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.studies.quality_magnetic_tile.data import (
    Sample,
    frame_tiles,
    full_frames,
    tile_dataset,
    tile_origins,
)
from benchmarks.studies.quality_magnetic_tile.operating import operating_point, val_summary
from benchmarks.studies.quality_magnetic_tile.settings import FULL_SIZE


# -- the supervised CNN -----------------------------------------------------------------
def make_net(n_classes: int, channels: int = 8):
    """GlimpseCNN (the agent's glimpse CNN) on standardised input + a linear head."""
    import torch
    from torch import nn

    from inspector.train.network import GlimpseCNN, standardise

    class FrameNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = GlimpseCNN(channels)
            self.head = nn.Linear(self.cnn.out_dim, n_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.cnn(standardise(x)))

    return FrameNet()


def predict(net: Any, x: np.ndarray, batch: int = 2048) -> np.ndarray:
    """Class probabilities [n, C] for uint8 images [n, H, W]."""
    import torch

    net.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = torch.from_numpy(x[i : i + batch]).float().unsqueeze(1)
            out.append(torch.softmax(net(xb), dim=1).numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


def fit(
    net: Any,
    x: np.ndarray,
    y: np.ndarray,
    budget_s: float,
    select: Callable[[Any], tuple[float, dict]],
    *,
    seed: int,
    sample_p: np.ndarray | None = None,
    class_weight: np.ndarray | None = None,
    batch: int = 256,
    lr: float = 1e-3,
    select_every_s: float = 20.0,
) -> dict[str, Any]:
    """Train ``net`` on (x, y) until ``budget_s`` is spent; keep the state ``select`` likes best.

    Batches are drawn with ``sample_p`` (uniform when None) and flipped/rotated by a
    random dihedral transform; ``select(net)`` returns (score on val, details) and runs
    every ``select_every_s`` seconds and at the end (its time counts in the budget).
    """
    import torch
    from torch.nn import functional as F

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    cw = torch.as_tensor(class_weight, dtype=torch.float32) if class_weight is not None else None
    t0 = time.perf_counter()
    best = {"score": -1.0, "state": None, "details": {}, "at_s": 0.0, "iteration": 0}
    history = []
    last_select, select_cost, it = t0, 0.0, 0

    def do_select() -> None:
        nonlocal select_cost
        ts = time.perf_counter()
        score, details = select(net)
        select_cost = time.perf_counter() - ts
        history.append({"at_s": round(ts - t0, 1), "iteration": it, "val": round(score, 4)})
        if score > best["score"]:
            best.update(
                score=score,
                state=copy.deepcopy(net.state_dict()),
                details=details,
                at_s=ts - t0,
                iteration=it,
            )

    while time.perf_counter() - t0 + select_cost < budget_s:
        net.train()
        idx = rng.choice(len(x), size=batch, p=sample_p)
        xb = torch.from_numpy(x[idx]).float().unsqueeze(1)
        k = int(rng.integers(8))  # one dihedral transform per batch: cheap augmentation
        if k & 4:
            xb = xb.flip(-1)
        xb = torch.rot90(xb, k & 3, dims=(-2, -1))
        loss = F.cross_entropy(net(xb), torch.from_numpy(y[idx]), weight=cw)
        opt.zero_grad()
        loss.backward()
        opt.step()
        it += 1
        if time.perf_counter() - last_select >= select_every_s:
            do_select()
            last_select = time.perf_counter()
    do_select()
    net.load_state_dict(best["state"])
    return {
        "iterations": it,
        "samples_seen": it * batch,
        "train_s": time.perf_counter() - t0,
        "best_val": best["score"],
        "best_at_s": best["at_s"],
        "best_iteration": best["iteration"],
        "details": best["details"],
        "history": history,
    }


# -- frame verdicts and metrics -----------------------------------------------------------
def frame_metrics(
    classes: Sequence[str],
    ok_class: str,
    labels: Sequence[str],
    verdicts: Sequence[str],
    pixel_fractions: Sequence[float],
) -> dict[str, Any]:
    """``eval``'s metrics for verdicts that did not come from an agent episode."""
    from inspector.policy.agent import Decision
    from inspector.train.evaluate import metrics

    decisions = [
        Decision(verdict=v, probabilities=np.zeros(0), steps=0, path=[], pixel_fraction=pf)
        for v, pf in zip(verdicts, pixel_fractions)
    ]
    return metrics(list(classes), ok_class, list(labels), decisions)


def tiling_scores(net: Any, samples: Sequence[Sample], ok: int) -> dict[str, np.ndarray]:
    """Per frame: the top tile's defect probability, that tile's defect class, pixel fraction."""
    tiles, owner, fracs = [], [], []
    for i, s in enumerate(samples):
        t, pf = frame_tiles(s.image)
        tiles.append(t)
        owner.append(np.full(len(t), i))
        fracs.append(pf)
    p = predict(net, np.concatenate(tiles))
    owner = np.concatenate(owner)
    defect = 1.0 - p[:, ok]
    p_def = p.copy()
    p_def[:, ok] = -1.0
    score = np.full(len(samples), -1.0)
    cls = np.zeros(len(samples), dtype=int)
    for i in range(len(samples)):
        rows = np.nonzero(owner == i)[0]
        j = rows[int(np.argmax(defect[rows]))]
        score[i] = defect[j]
        cls[i] = int(np.argmax(p_def[j]))
    return {"score": score, "cls": cls, "pixel_fraction": np.asarray(fracs)}


def tiling_verdicts(
    sc: dict[str, np.ndarray], threshold: float, classes: Sequence[str], ok_class: str
) -> list[str]:
    """Frame verdicts: the top tile's defect class above ``threshold``, else ok."""
    return [classes[c] if s > threshold else ok_class for s, c in zip(sc["score"], sc["cls"])]


def pick_threshold(
    sc: dict[str, np.ndarray], labels: Sequence[str], classes: Sequence[str], ok_class: str
) -> tuple[float, float]:
    """(threshold, balanced accuracy): the defect-score threshold best on these frames.

    Candidates lie halfway between neighbouring scores (and between the extremes and 0, 1),
    never on a score: a frame scored exactly at the threshold would otherwise be decided by
    float rounding wherever the rule is re-expressed (the operating point's ok bias
    ``logit(threshold)``), and on unseen frames the midpoint is the less arbitrary cut.
    """
    edges = np.unique(np.concatenate([[0.0], np.asarray(sc["score"], dtype=np.float64), [1.0]]))
    mid = (edges[:-1] + edges[1:]) / 2
    # Neighbours one float apart have no number between them: no cut to make there.
    cands = mid[(mid > edges[:-1]) & (mid < edges[1:])]
    best = (1.0, -1.0)
    for thr in cands:
        v = tiling_verdicts(sc, float(thr), classes, ok_class)
        m = frame_metrics(classes, ok_class, labels, v, sc["pixel_fraction"])
        # Ties go to the higher threshold: fewer false alarms at the same balanced accuracy.
        if m["balanced_accuracy"] >= best[1]:
            best = (float(thr), m["balanced_accuracy"])
    return best


def tiling_probs(sc: dict[str, np.ndarray], n_classes: int, ok: int) -> np.ndarray:
    """Tiling's frame scores as class probabilities: p(ok) = 1 - top tile's defect score,
    its defect class the rest; an ok bias b is then the threshold s > 1 / (1 + e^-b)."""
    p = np.zeros((len(sc["score"]), n_classes))
    p[:, ok] = 1.0 - sc["score"]
    p[np.arange(len(p)), sc["cls"]] += sc["score"]
    return p


# -- the three methods --------------------------------------------------------------------
def run_tiling(
    train: Sequence[Sample],
    val: Sequence[Sample],
    test: Sequence[Sample],
    budget_s: float,
    seed: int,
    classes: Sequence[str],
    ok_class: str,
    channels: int = 8,
    select_every_s: float = 20.0,
) -> dict[str, Any]:
    """Exhaustive tiling: train on train tiles, pick state and threshold on val, test."""
    import torch

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x, y = tile_dataset(train, classes, ok_class, rng)
    ok = list(classes).index(ok_class)
    # Half of every batch free tiles, the other half split evenly over the defect classes
    # present: defect tiles are about 2 % of all tiles.
    present = [c for c in range(len(classes)) if c != ok and (y == c).any()]
    share = np.where(y == ok, 0.5 / max(1, (y == ok).sum()), 0.0)
    for c in present:
        share[y == c] = 0.5 / len(present) / (y == c).sum()
    share /= share.sum()
    prep_s = time.perf_counter() - t0
    torch.manual_seed(seed)
    net = make_net(len(classes), channels)
    val_labels = [s.label for s in val]

    def select(n: Any) -> tuple[float, dict]:
        thr, bal = pick_threshold(tiling_scores(n, val, ok), val_labels, classes, ok_class)
        return bal, {"threshold": thr}

    fitted = fit(
        net,
        x,
        y,
        budget_s - prep_s,
        select,
        seed=seed,
        sample_p=share,
        select_every_s=select_every_s,
    )
    thr = fitted["details"]["threshold"]
    spent = time.perf_counter() - t0
    sc = tiling_scores(net, test, ok)
    verdicts = tiling_verdicts(sc, thr, classes, ok_class)
    m = frame_metrics(classes, ok_class, [s.label for s in test], verdicts, sc["pixel_fraction"])
    op = baseline_operating_point("tiling", net, val, test, classes, ok_class, thr)
    counts = {c: int((y == i).sum()) for i, c in enumerate(classes)}
    return {
        "method": "tiling",
        "seed": seed,
        "budget_s": budget_s,
        "spent_s": spent,
        "prep_s": prep_s,
        "train_tiles": counts,
        "threshold": thr,
        "fit": fitted,
        "tiles_per_frame": float(np.mean([len(tile_origins(*s.image.shape[:2])) for s in test])),
        "test": m,
        "operating_point": op,
        "_net": net,
    }


def run_fullframe(
    train: Sequence[Sample],
    val: Sequence[Sample],
    test: Sequence[Sample],
    budget_s: float,
    seed: int,
    classes: Sequence[str],
    ok_class: str,
    channels: int = 8,
    select_every_s: float = 20.0,
) -> dict[str, Any]:
    """The whole frame at FULL_SIZE x FULL_SIZE, class-weighted cross-entropy."""
    import torch

    t0 = time.perf_counter()
    idx = {c: i for i, c in enumerate(classes)}
    x = full_frames(train)
    y = np.asarray([idx[s.label] for s in train], dtype=np.int64)
    xv, xt = full_frames(val), full_frames(test)
    counts = np.bincount(y, minlength=len(classes)).astype(float)
    # Inverse-frequency weights (classes absent from train get weight 0).
    weight = np.where(counts > 0, counts.sum() / np.maximum(counts, 1.0) / len(classes), 0.0)
    prep_s = time.perf_counter() - t0
    torch.manual_seed(seed)
    net = make_net(len(classes), channels)
    val_labels = [s.label for s in val]

    def select(n: Any) -> tuple[float, dict]:
        v = [classes[i] for i in predict(n, xv).argmax(1)]
        m = frame_metrics(classes, ok_class, val_labels, v, [0.0] * len(v))
        return m["balanced_accuracy"], val_summary(m)

    fitted = fit(
        net,
        x,
        y,
        budget_s - prep_s,
        select,
        seed=seed,
        class_weight=weight,
        batch=64,
        select_every_s=select_every_s,
    )
    spent = time.perf_counter() - t0
    verdicts = [classes[i] for i in predict(net, xt).argmax(1)]
    m = frame_metrics(classes, ok_class, [s.label for s in test], verdicts, [0.0] * len(test))
    op = baseline_operating_point("fullframe", net, val, test, classes, ok_class)
    frame_px = np.mean([s.image.size for s in test])
    return {
        "method": "fullframe",
        "seed": seed,
        "budget_s": budget_s,
        "spent_s": spent,
        "prep_s": prep_s,
        "input": f"{FULL_SIZE}x{FULL_SIZE}",
        "input_pixels_over_frame_pixels": float(FULL_SIZE * FULL_SIZE / frame_px),
        "fit": fitted,
        "test": m,
        "operating_point": op,
        "_net": net,
    }


def baseline_operating_point(
    method: str,
    net: Any,
    val: Sequence[Sample],
    test: Sequence[Sample],
    classes: Sequence[str],
    ok_class: str,
    threshold: float = 0.5,
) -> dict[str, Any]:
    """:func:`operating_point` of a trained tiling or full-frame net (``threshold``: the
    tiling threshold it was run with)."""
    ok = list(classes).index(ok_class)
    idx = {c: i for i, c in enumerate(classes)}

    def probs(samples: Sequence[Sample]) -> tuple[np.ndarray, np.ndarray]:
        y = np.asarray([idx[s.label] for s in samples])
        if method == "tiling":
            return tiling_probs(tiling_scores(net, samples, ok), len(classes), ok), y
        return predict(net, full_frames(samples)), y

    # Both decide by the top class (argmax): no outcome values. Tiling calls a frame
    # defective when its score s > thr, i.e. when s > (1 - s) e^b with b = logit(thr).
    thr = min(max(threshold, 1e-12), 1 - 1e-12)
    as_run = float(np.log(thr / (1 - thr))) if method == "tiling" else 0.0
    zeros = np.zeros((len(classes), len(classes)))
    return operating_point(probs(val), probs(test), zeros, as_run=as_run)
