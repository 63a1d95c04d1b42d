"""Quality on real footage: the agent against exhaustive tiling and a full-frame CNN.

Train on the magnetic-tile ``train`` split, select on ``val``, report on ``test`` only
(all 263 frames; the test split is never trained or selected on). Three methods, each
given the same wall-clock budget in the same run (training plus the validation passes
that select its checkpoint; the actual seconds are reported):

* **agent**: ``train_run`` with reward_profiles/magnetic_tile.yaml over the ``folder``
  driver (split=train), TrainConfig defaults (hybrid loss 0.7/0.2/0.1, scripted
  teacher), trained in resumable chunks; after every chunk the model is evaluated on
  val and the best val balanced accuracy is kept. The learning rate is held constant
  (``lr_floor = learning_rate``): every resumed chunk would restart the cosine schedule's
  progress, so the schedule would anneal to its floor at the end of each chunk.
* **tiling**: the same CNN (GlimpseCNN + standardise, a linear head to the classes),
  trained supervised on native 32x32 tiles of the train frames. A tile is labelled with
  its image's class when it holds at least ``MIN_OVERLAP`` mask pixels, free when it
  holds none; tiles touching 1..MIN_OVERLAP-1 mask pixels are ambiguous and left out.
  Every tile of a test frame is classified; the frame's verdict is the class of its
  most confident defect tile when that tile's defect probability (1 - p(free)) exceeds
  a threshold chosen on val, else free. Pixels examined: every tile (edge tiles are
  shifted inside the frame, so they overlap their neighbours: slightly over 1.0).
* **fullframe**: the whole frame resized to 64x64 (INTER_AREA), the same CNN family,
  class-weighted cross-entropy. It examines no native-resolution pixel (pixel
  fraction 0; the 64x64 input is reported beside it).

Metrics come from :func:`inspector.train.evaluate.metrics` for all three. Each method
also gets the goal's operating point (:func:`operating_point`): its defect AUROC on val
and test, and the test figures at the ok bias (tiling: the threshold) that gives the
highest val recall with val false alarms at most 5 %, as ``inspector calibrate
--max-false-alarms 0.05`` would choose it; ``--rescore`` adds that to saved results
from their saved models. Results are
saved per method under benchmarks/results/quality_magnetic_tile/<mode>/ (quick/ is
git-ignored) so an interrupted run resumes; the agent's training run lives under
runs/quality_magnetic_tile/<mode>/ and resumes from its last chunk.

    python -m benchmarks.quality_magnetic_tile --quick       # 2.5 min a method, < 10 min
    python -m benchmarks.quality_magnetic_tile               # 20 min a method
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._report import table, write_section  # noqa: E402

# --agent-balanced-verdict weighs the teacher's stop steps as learning_efficiency does.
from benchmarks.learning_efficiency import BALANCED_STOP_WEIGHT  # noqa: E402
from inspector.commands._args import non_negative_int  # noqa: E402

PROFILE = str(ROOT / "reward_profiles" / "magnetic_tile.yaml")
RESULTS = ROOT / "benchmarks" / "results" / "quality_magnetic_tile"
RUNS = ROOT / "runs" / "quality_magnetic_tile"
METHODS = ("agent", "tiling", "fullframe")
TILE = 32
FULL_SIZE = 64
#: Mask pixels a tile must hold to carry its image's defect label (focus_defect's min_area).
MIN_OVERLAP = 4
#: Extra training tiles per defective frame, centred near random mask pixels.
JITTER = 16
GOALS = {"defect_recall": 0.95, "false_alarm_rate": 0.05, "balanced_accuracy": 0.85}
GOAL_PIXELS = 0.25


# -- data -----------------------------------------------------------------------------
@dataclass
class Sample:
    """One labelled frame.

    :param image: gray uint8 frame.
    :param mask: boolean defect mask (all False on free frames), or None.
    :param label: the frame's class.
    """

    image: np.ndarray
    mask: np.ndarray | None
    label: str


def camera_params(root: str | Path, split: str) -> dict[str, str]:
    """``folder`` driver parameters for one split of the data set."""
    return {"path": str(root), "manifest": "splits.csv", "split": split}


def load_split(root: str | Path, split: str, limit: int | None = None) -> list[Sample]:
    """The frames of ``split`` through the ``folder`` driver (the agent's camera).

    :param limit: keep only the first ``limit`` readable frames (tests).
    """
    from inspector.camera import open_camera
    from inspector.scan import to_gray

    driver = open_camera("folder", camera_params(root, split))
    out: list[Sample] = []
    try:
        for i in range(len(driver)):
            if limit is not None and len(out) >= limit:
                break
            f = driver.load(i)
            if f is None or f.truth is None:
                continue
            img = to_gray(f.image)
            out.append(Sample(img, f.truth.defect_mask(img.shape[:2]), f.truth.label))
    finally:
        driver.close()
    return out


def tile_origins(h: int, w: int, tile: int = TILE) -> list[tuple[int, int]]:
    """Top-left corners (y, x) of tiles covering an h x w frame.

    ceil(side / tile) tiles per axis, evenly spread so the last one ends at the edge
    (neighbours overlap rather than leaving a strip unseen). A side shorter than the
    tile gets one tile at 0 (the frame is padded by :func:`frame_tiles`).
    """

    def axis(n: int) -> list[int]:
        if n <= tile:
            return [0]
        k = -(-n // tile)
        return sorted({int(round(v)) for v in np.linspace(0, n - tile, k)})

    return [(y, x) for y in axis(h) for x in axis(w)]


def _pad(image: np.ndarray, tile: int) -> np.ndarray:
    h, w = image.shape[:2]
    if h >= tile and w >= tile:
        return image
    return np.pad(image, ((0, max(0, tile - h)), (0, max(0, tile - w))), mode="edge")


def frame_tiles(image: np.ndarray, tile: int = TILE) -> tuple[np.ndarray, float]:
    """All tiles of a frame as [n, tile, tile] uint8, and the pixel fraction they examine."""
    h, w = image.shape[:2]
    img = _pad(image, tile)
    origins = tile_origins(h, w, tile)
    tiles = np.stack([img[y : y + tile, x : x + tile] for y, x in origins])
    return tiles, len(origins) * tile * tile / float(h * w)


def tile_dataset(
    samples: Sequence[Sample],
    classes: Sequence[str],
    ok_class: str,
    rng: np.random.Generator,
    tile: int = TILE,
    jitter: int = JITTER,
) -> tuple[np.ndarray, np.ndarray]:
    """Training tiles and labels: every grid tile plus ``jitter`` crops per defect frame."""
    idx = {c: i for i, c in enumerate(classes)}
    xs: list[np.ndarray] = []
    ys: list[int] = []
    for s in samples:
        img = _pad(s.image, tile)
        mask = (
            _pad(s.mask.astype(np.uint8), tile)
            if s.mask is not None
            else np.zeros(img.shape, dtype=np.uint8)
        )
        defect = s.label != ok_class
        for y, x in tile_origins(*s.image.shape[:2], tile):
            n = int(mask[y : y + tile, x : x + tile].sum())
            if defect and n >= MIN_OVERLAP:
                ys.append(idx[s.label])
            elif n == 0:
                ys.append(idx[ok_class])
            else:
                continue  # a sliver of defect: neither clearly defective nor clearly free
            xs.append(img[y : y + tile, x : x + tile])
        if defect and mask.any() and jitter:
            py, px = np.nonzero(mask)
            h, w = img.shape
            for k in rng.integers(len(py), size=jitter):
                y = int(np.clip(py[k] - rng.integers(tile), 0, h - tile))
                x = int(np.clip(px[k] - rng.integers(tile), 0, w - tile))
                if mask[y : y + tile, x : x + tile].sum() >= MIN_OVERLAP:
                    xs.append(img[y : y + tile, x : x + tile])
                    ys.append(idx[s.label])
    return np.stack(xs).astype(np.uint8), np.asarray(ys, dtype=np.int64)


def full_frames(samples: Sequence[Sample], size: int = FULL_SIZE) -> np.ndarray:
    """Every frame resized to size x size (anti-aliased, like the agent's overview)."""
    import cv2

    return np.stack(
        [cv2.resize(s.image, (size, size), interpolation=cv2.INTER_AREA) for s in samples]
    )


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


def _summary(m: dict[str, Any]) -> dict[str, Any]:
    keys = ("balanced_accuracy", "defect_recall", "false_alarm_rate", "accuracy")
    return {k: m[k] for k in keys}


# -- the goal's operating point -----------------------------------------------------------
def operating_point(
    val: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    outcome_matrix: np.ndarray,
    ceiling: float = GOALS["false_alarm_rate"],
    as_run: float = 0.0,
) -> dict[str, Any]:
    """Each split's defect AUROC, and the test figures at the ok bias chosen on val.

    The bias is what ``inspector calibrate --max-false-alarms ceiling`` picks on val (the
    highest val recall with val false alarms at most ``ceiling``); test only reports.

    :param val: (class probabilities [N, C], true class indices [N]); ``test`` likewise.
    :param outcome_matrix: the verdict rule (all zeros: argmax of the probabilities).
    :param as_run: the bias that reproduces the method's own verdicts (tiling: the logit of
        its val threshold); the test figures there go in ``test_as_run``, a check that the
        probabilities are those of the run that produced the saved result.
    """
    from inspector.errors import InspectorError
    from inspector.policy.operating_point import choose_bias, defect_auroc, rates_at

    (pv, yv), (pt, yt) = val, test
    out: dict[str, Any] = {
        "false_alarm_ceiling": ceiling,
        "auroc_val": defect_auroc(pv, yv != 0),
        "auroc_test": defect_auroc(pt, yt != 0),
        "test_as_run": rates_at(pt, yt, outcome_matrix, as_run),
    }
    try:
        bias, at_val = choose_bias(pv, yv, outcome_matrix, "max_false_alarms", ceiling)
    except InspectorError as exc:
        return {**out, "error": str(exc)}
    return {**out, "ok_bias": bias, "val": at_val, "test": rates_at(pt, yt, outcome_matrix, bias)}


def tiling_probs(sc: dict[str, np.ndarray], n_classes: int, ok: int) -> np.ndarray:
    """Tiling's frame scores as class probabilities: p(ok) = 1 - top tile's defect score,
    its defect class the rest; an ok bias b is then the threshold s > 1 / (1 + e^-b)."""
    p = np.zeros((len(sc["score"]), n_classes))
    p[:, ok] = 1.0 - sc["score"]
    p[np.arange(len(p)), sc["cls"]] += sc["score"]
    return p


def load_agent(model_dir: Path) -> Any:
    """A saved agent run (its model.zip) as a torch policy, as the product loads it."""
    from inspector.train.torch_policy import load_any_policy

    return load_any_policy(model_dir)


def policy_probs(
    policy: Any, root: str | Path, split: str, episodes: int = 100_000
) -> tuple[np.ndarray, np.ndarray, Any]:
    """A loaded policy's class probabilities at each decision on a split: (probs, labels, R)."""
    _, probs, y = policy_pass(policy, root, split, episodes)
    return probs, y, policy.meta.outcome_matrix


def policy_pass(
    policy: Any, root: str | Path, split: str, episodes: int = 100_000
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """One pass of a loaded policy over a split: ``evaluate()``'s metrics, and the class
    probabilities at each decision with the true class indices (for operating points)."""
    from inspector.train.evaluate import decision_probabilities, metrics, run_parts

    labels, decisions, _ = run_parts(policy, "folder", camera_params(root, split), episodes)
    classes = policy.meta.classes
    probs, y = decision_probabilities(classes, labels, decisions)
    return metrics(classes, classes[0], labels, decisions), probs, y


def policy_test_figures(
    policy: Any, root: str | Path, val_episodes: int = 100_000, test_episodes: int = 100_000
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(test metrics, :func:`operating_point`) of a loaded policy: one val pass, one test
    pass (the metrics and the operating point's test figures come from the same pass)."""
    pv, yv, rule = policy_probs(policy, root, "val", val_episodes)
    test, pt, yt = policy_pass(policy, root, "test", test_episodes)
    return test, operating_point((pv, yv), (pt, yt), rule)


def agent_operating_point(
    model_dir: Path, root: str | Path, val_episodes: int = 100_000, test_episodes: int = 100_000
) -> dict[str, Any]:
    """:func:`operating_point` of a saved agent (one val and one test pass)."""
    return policy_test_figures(load_agent(model_dir), root, val_episodes, test_episodes)[1]


# -- verdict ensembles of saved agents ------------------------------------------------------
def ensemble_path(out_dir: Path, key: str, seeds: Sequence[int], budget_s: float) -> Path:
    """Where :func:`run_ensemble` saves its result (a folder of its own, so the per-seed
    tables, which glob ``out_dir/*_s<seed>_<budget>s.json``, never mistake it for a run)."""
    joined = "-".join(str(s) for s in seeds)
    return out_dir / "ensembles" / f"{key}_seeds{joined}_{budget_s:.0f}s.json"


def run_ensemble(
    out_dir: Path,
    runs_dir: Path,
    key: str,
    seeds: Sequence[int],
    budget_s: float,
    root: str | Path,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
) -> dict[str, Any]:
    """The verdict ensemble (:mod:`inspector.policy.ensemble`) of the saved agent runs
    ``key`` with ``seeds`` (lead first) at ``budget_s``: test figures and the goal's
    operating point (its own bias, chosen on val), training nothing.

    The ensemble is what ``inspector export <lead> --ensemble <other> ...`` exports: the
    lead's moves (so its pixels), the members' geometric-mean verdict. Its training cost is
    the members' together (``spent_s``).

    :raises RuntimeError: a member's run or saved result is missing.
    """
    from inspector.policy.ensemble import EnsemblePolicy
    from inspector.train.torch_policy import load_any_policy

    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise RuntimeError(f"an ensemble needs two or more different seeds, got {list(seeds)}")
    members, saved = [], []
    for seed in seeds:
        name = f"{key}_s{seed}_{budget_s:.0f}s"
        best, result = runs_dir / name / "best", out_dir / f"{name}.json"
        if not (best / "model.zip").is_file() or not result.is_file():
            raise RuntimeError(
                f"ensemble: no saved run {name} (its best/ model and result); train it first"
                f" with --seed {seed} --budget-min {budget_s / 60:g} and the same agent flags"
            )
        members.append(load_any_policy(best))
        saved.append(json.loads(result.read_text()))
    policy = EnsemblePolicy(members, names=[f"seed {s}" for s in seeds])
    test, op = policy_test_figures(policy, root, val_episodes, test_episodes)

    def alone(r: dict[str, Any]) -> dict[str, Any]:
        op = r.get("operating_point") or {}
        return {"auroc_test": op.get("auroc_test"), "test": op.get("test"), "as_trained": r["test"]}

    return {
        "method": "agent_ensemble",
        "key": key,
        "seeds": list(seeds),
        "budget_s": budget_s,
        "spent_s": sum(r["spent_s"] for r in saved),
        "models": [r["model"] for r in saved],
        "members": [alone(r) for r in saved],
        "test": test,
        "operating_point": op,
    }


def _goals_cell(at: dict[str, Any], pixels: float, tiling_pixels: float | None) -> str:
    """ "met" or which goals are missed, for test figures at an operating point."""
    if not at:
        return "—"
    missed = [k.replace("_", " ") for k, ok in goals_met(at).items() if not ok]
    if tiling_pixels and pixels / tiling_pixels > GOAL_PIXELS:
        missed.append("pixels")
    return "missed: " + ", ".join(missed) if missed else "met"


def ensembles_table(
    ens_dir: Path, names: dict[str, str], tiling_pixels: float | None = None
) -> str:
    """Markdown: every saved verdict ensemble beside its members alone, one table per
    members' method, then a summary by budget and size (medians, sets meeting the goals).

    :param tiling_pixels: the tiling baseline's test pixel fraction, for the pixel goal
        (without it the goals column leaves the pixels out).
    """
    saved = [json.loads(p.read_text()) for p in ens_dir.glob("*.json")] if ens_dir.is_dir() else []
    if not saved:
        return ""
    saved.sort(key=lambda r: (r["key"], r["budget_s"], len(r["seeds"]), r["seeds"]))
    header = [
        "seeds (lead first)",
        "training: runs x budget / spent min",
        "test AUROC",
        "recall / false alarms at the operating point",
        "balanced acc there",
        "as combined (bias 0): balanced / recall / false alarms",
        "pixel fraction",
        "goals at the operating point",
        "each seed alone: AUROC / recall / false alarms at its operating point",
    ]
    tables, groups = [], {}
    for key in dict.fromkeys(r["key"] for r in saved):
        rows = []
        for r in (r for r in saved if r["key"] == key):
            op, m = r["operating_point"], r["test"]
            at = op.get("test") or {}
            goals = _goals_cell(at, m["pixel_fraction"], tiling_pixels)
            groups.setdefault((key, r["budget_s"], len(r["seeds"])), []).append((op, goals))
            each = "; ".join(
                f"{s}: {_f(a['auroc_test'])} / {_f((a['test'] or {}).get('defect_recall'), 2)}"
                f" / {_f((a['test'] or {}).get('false_alarm_rate'), 2)}"
                for s, a in zip(r["seeds"], r["members"])
            )
            rows.append(
                [
                    ",".join(str(s) for s in r["seeds"]),
                    f"{len(r['seeds'])} x {r['budget_s'] / 60:g} / {r['spent_s'] / 60:.0f}",
                    _f(op.get("auroc_test")),
                    f"{_f(at.get('defect_recall'), 2)} / {_f(at.get('false_alarm_rate'), 2)}",
                    _f(at.get("balanced_accuracy")),
                    f"{_f(m['balanced_accuracy'])} / {_f(m['defect_recall'], 2)}"
                    f" / {_f(m['false_alarm_rate'], 2)}",
                    _f(m["pixel_fraction"], 4),
                    goals,
                    each,
                ]
            )
        tables.append(f"Members: {names.get(key) or agent_name(key)}.\n\n" + table(header, rows))

    def med(ops: list, get: Callable[[dict], Any]) -> str:
        return _median([get(op) for op, _ in ops])

    summary = [
        [
            f"{size} x {budget / 60:g}",
            str(len(ops)),
            med(ops, lambda op: op.get("auroc_test")),
            med(ops, lambda op: (op.get("test") or {}).get("defect_recall")),
            med(ops, lambda op: (op.get("test") or {}).get("false_alarm_rate")),
            med(ops, lambda op: (op.get("test") or {}).get("balanced_accuracy")),
            f"{sum(g == 'met' for _, g in ops)} / {len(ops)}",
        ]
        for (_, budget, size), ops in groups.items()
    ]
    conf = np.asarray(saved[0]["test"]["confusion"])  # rows: truth, the ok class first
    n_good, n_bad = int(conf[0].sum()), int(conf[1:].sum())
    return (
        "\nVerdict ensembles of saved agents (`--ensemble-seeds A,B,... --budget-min N` with"
        " the members' flags; trains nothing; what `inspector export <lead run> --ensemble"
        " <run> ...` exports): the lead seed's agent chooses every glimpse, each member's"
        " verdict head reads the lead's observation, and the class probabilities are their"
        " normalised geometric mean, so the pixels examined are the lead's and the cost is one"
        " forward pass per member and step. The operating point is the ensemble's own ok bias"
        " chosen on val (as above); the goals are judged there (pixels against this table's"
        " tiling run). Training cost is the members' together."
        + (
            f" The test split has {n_bad} defective and {n_good} good frames: one frame moves"
            f" recall by {1 / n_bad:.3f} and false alarms by {1 / n_good:.3f}."
            if n_bad and n_good
            else ""
        )
        + "\n\n"
        + "\n".join(tables)
        + "\nBy size and budget (every saved set of members and lead; sets share seeds, so"
        " they are not independent):\n\n"
        + table(
            [
                "members x budget min",
                "ensembles",
                "median test AUROC",
                "median recall",
                "median false alarms",
                "median balanced acc",
                "goals met",
            ],
            summary,
        )
    )


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
        return m["balanced_accuracy"], _summary(m)

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


def agent_config(seed: int, **overrides: Any):
    """TrainConfig defaults (hybrid loss, scripted teacher) with a constant learning rate."""
    from inspector.train.config import TrainConfig

    base = TrainConfig()
    return base.replace(seed=seed, lr_floor=base.learning_rate, final_eval_episodes=0, **overrides)


def _eval_agent(model_dir: Path, root: str | Path, split: str, episodes: int = 100_000):
    """``evaluate()``'s metrics of a saved agent on a split."""
    return policy_pass(load_agent(model_dir), root, split, episodes)[0]


SELECT = ("balanced_accuracy", "defect_auroc")


def _better(entry: dict[str, Any], best: dict[str, Any], select: str) -> bool:
    """Whether a val entry beats the kept one on ``select`` (then balanced accuracy)."""
    if select not in SELECT:
        raise ValueError(f"select must be one of {SELECT}, got {select!r}")

    def key(e: dict[str, Any]) -> tuple[float, float]:
        v = e.get(select)
        return (-1.0 if v is None else float(v), float(e["balanced_accuracy"]))

    return key(entry) > key(best)


def run_agent(
    root: str | Path,
    budget_s: float,
    seed: int,
    run_dir: Path,
    *,
    chunk: int = 4096,
    first_chunk: int = 1024,
    cfg: Any = None,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
    profile_path: str = PROFILE,
    select: str = "balanced_accuracy",
) -> dict[str, Any]:
    """Train the agent in resumable chunks until ``budget_s`` is spent; best val -> test.

    :param select: the val figure that picks the kept chunk: ``balanced_accuracy`` (of the
        verdicts as trained) or ``defect_auroc`` (threshold-free, what the operating
        point then works with; ties go to the later chunk's balanced accuracy).

    ``run_dir/state.json`` records the seconds spent and the val curve, so a killed run
    continues where its last finished chunk left off (a chunk cut short is lost time).

    :param profile_path: the reward profile (default reward_profiles/magnetic_tile.yaml).
    """
    from inspector.train.runner import train_run

    cfg = cfg or agent_config(seed)
    rollout = cfg.n_envs * cfg.n_steps
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "state.json"
    state = (
        json.loads(state_path.read_text())
        if state_path.exists()
        else {"spent_s": 0.0, "train_s": 0.0, "steps": 0, "history": [], "best": None}
    )
    best_dir = run_dir / "best"
    while True:
        remaining = budget_s - state["spent_s"]
        if state["steps"]:
            rate = state["steps"] / max(1e-6, state["train_s"])
            eval_s = np.mean([h["val_s"] for h in state["history"]])
            want = min(chunk, int((remaining - eval_s) * rate) // rollout * rollout)
        else:
            want = max(rollout, first_chunk // rollout * rollout)
        if want < rollout or remaining <= 0:
            break
        t0 = time.perf_counter()
        res = train_run(
            profile_path,
            "folder",
            camera_params(root, "train"),
            state["steps"] + want,
            run_dir / "run",
            cfg,
            resume=True,
            progress=False,
            evaluate_after=False,
        )
        t1 = time.perf_counter()
        m = _eval_agent(run_dir / "run", root, "val", val_episodes)
        t2 = time.perf_counter()
        state["steps"] = res.timesteps
        state["train_s"] += t1 - t0
        state["spent_s"] += t2 - t0
        entry = {
            "steps": res.timesteps,
            "at_s": round(state["spent_s"], 1),
            "val_s": t2 - t1,
            **_summary(m),
            "mean_steps": m["mean_steps"],
            "native_share": m["native_share"],
            "stopped_share": m["stopped_share"],
            "defect_auroc": m.get("defect_auroc"),
        }
        state["history"].append(entry)
        if state["best"] is None or _better(entry, state["best"], select):
            best_dir.mkdir(exist_ok=True)
            for name in ("model.zip", "profile.yaml", "profile.sha256", "config.yaml"):
                shutil.copyfile(run_dir / "run" / name, best_dir / name)
            state["best"] = entry
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(state_path)
        print(
            f"  agent: {res.timesteps} steps, {state['spent_s']:.0f}/{budget_s:.0f} s, val "
            f"bal.acc {m['balanced_accuracy']:.3f}, mean steps {m['mean_steps']:.1f}, "
            f"native share {m['native_share']:.2f}",
            flush=True,
        )
    if state["best"] is None:
        raise RuntimeError(f"agent: budget {budget_s:.0f} s too small for one chunk")
    test, op = policy_test_figures(load_agent(best_dir), root, val_episodes, test_episodes)
    return {
        "method": "agent",
        "seed": seed,
        "budget_s": budget_s,
        "spent_s": state["spent_s"],
        "train_s": state["train_s"],
        "steps": state["steps"],
        "steps_per_s": state["steps"] / max(1e-6, state["train_s"]),
        "best_val": state["best"],
        "history": state["history"],
        "config": dataclasses.asdict(cfg),
        "model": str(best_dir.relative_to(ROOT) if best_dir.is_relative_to(ROOT) else best_dir),
        "test": test,
        "operating_point": op,
    }


def reselect(
    out_dir: Path,
    runs_dir: Path,
    key: str,
    suffix: str,
    root: str | Path,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
) -> dict[str, Any]:
    """``key + "_sauc"`` from the saved run ``key`` (kept by val balanced accuracy): the
    chunk with the best val defect AUROC among its chunk-end checkpoints, then test.

    Which chunk is kept does not change training, so this is the run
    ``--agent-select-auroc`` would have made with the same chunks, without training it
    again. Each checkpoint is first checked against the val balanced accuracy recorded
    for it.

    :raises RuntimeError: the run, a checkpoint, or its recorded val figure is missing.
    """
    src_path = out_dir / f"{key}{suffix}.json"
    run_dir = runs_dir / f"{key}{suffix}"
    state_path = run_dir / "state.json"
    if not src_path.is_file() or not state_path.is_file():
        raise RuntimeError(f"reselect: no saved run {key}{suffix} to re-select from")
    src = json.loads(src_path.read_text())
    state = json.loads(state_path.read_text())
    new_key = key + "_sauc"
    new_dir = runs_dir / f"{new_key}{suffix}"
    side = ("profile.yaml", "profile.sha256", "config.yaml")

    def stage(steps: int, dest: Path) -> Path:
        ckpt = run_dir / "run" / "checkpoints" / f"ckpt_{steps:09d}.zip"
        if not ckpt.is_file():
            raise RuntimeError(f"reselect: checkpoint {ckpt} is missing")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ckpt, dest / "model.zip")
        for name in side:
            shutil.copyfile(run_dir / "best" / name, dest / name)
        return dest

    entries, best = [], None
    for h in state["history"]:
        m = _eval_agent(stage(h["steps"], new_dir / "candidate"), root, "val", val_episodes)
        if abs(m["balanced_accuracy"] - h["balanced_accuracy"]) > 1e-9:
            raise RuntimeError(
                f"reselect: checkpoint at {h['steps']} steps gives val balanced accuracy"
                f" {m['balanced_accuracy']:.4f}, the run recorded {h['balanced_accuracy']:.4f}"
            )
        entry = {**h, "defect_auroc": m["defect_auroc"]}
        entries.append(entry)
        if best is None or _better(entry, best, "defect_auroc"):
            best = entry
        print(
            f"  reselect {h['steps']} steps: val AUROC {_f(m['defect_auroc'])},"
            f" balanced {m['balanced_accuracy']:.3f}",
            flush=True,
        )
    if best is None:
        raise RuntimeError(f"reselect: {key}{suffix} has no chunks")
    shutil.rmtree(new_dir / "candidate", ignore_errors=True)
    best_dir = stage(best["steps"], new_dir / "best")
    test, op = policy_test_figures(load_agent(best_dir), root, val_episodes, test_episodes)
    return {
        **src,
        "best_val": best,
        "history": entries,
        "select": "defect_auroc",
        "reselected_from": f"{key}{suffix}",
        "model": str(best_dir.relative_to(ROOT) if best_dir.is_relative_to(ROOT) else best_dir),
        "test": test,
        "operating_point": op,
    }


# -- report ---------------------------------------------------------------------------------
def _f(v: Any, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def goals_met(m: dict[str, Any]) -> dict[str, bool]:
    """Which quality goals a test result meets."""
    recall, fa = m["defect_recall"], m["false_alarm_rate"]
    return {
        "defect_recall": recall is not None and recall >= GOALS["defect_recall"],
        "false_alarm_rate": fa is not None and fa <= GOALS["false_alarm_rate"],
        "balanced_accuracy": m["balanced_accuracy"] >= GOALS["balanced_accuracy"],
    }


def report(
    results: dict[str, dict],
    mode: str,
    classes: Sequence[str],
    ok_class: str,
    threads: int = 1,
    by_seed: dict[str, dict[int, dict]] | None = None,
    op_by_seed: dict[str, dict[int, dict]] | None = None,
    out_dir: Path | None = None,
) -> str:
    """The markdown section: the table, the goals, the agent's diagnosis.

    :param by_seed: test metrics of every saved run of the same budget, by results key and
        seed (:func:`results_by_seed`); methods run with more than one seed get a table of
        their own.
    :param op_by_seed: the same for the saved operating points (``field="operating_point"``).
    :param out_dir: where the results are saved: runs at other budgets get their own
        table (:func:`budgets_table`).
    """
    defects = [c for c in classes if c != ok_class]
    header = [
        "method",
        "budget / spent s",
        "balanced acc",
        "defect recall",
        "false alarms",
        "recall " + " / ".join(defects + [ok_class]),
        "pixel fraction",
        "mean steps",
        "native share",
    ]
    names = {
        "agent": "agent (HybridPPO, scripted teacher)",
        "tiling": "exhaustive tiling, 32x32 native",
        "fullframe": f"full-frame CNN, {FULL_SIZE}x{FULL_SIZE}",
    }
    keys = ordered_keys(results)
    rows = []
    for meth in keys:
        r = results[meth]
        m = r["test"]
        rec = m["per_class_recall"]
        agent = meth.startswith("agent")
        rows.append(
            [
                names.get(meth) or agent_name(meth),
                f"{r['budget_s']:.0f} / {r['spent_s']:.0f}",
                _f(m["balanced_accuracy"]),
                _f(m["defect_recall"]),
                _f(m["false_alarm_rate"]),
                " / ".join(_f(rec.get(c), 2) for c in defects + [ok_class]),
                _f(m["pixel_fraction"], 4 if agent else 3),
                _f(m["mean_steps"], 1) if agent else "—",
                _f(m["native_share"], 2) if agent else "—",
            ]
        )
    body = table(header, rows)
    n_test = next(iter(results.values()))["test"]["episodes"] if results else 0
    notes = [
        "",
        f"Mode: {mode}. Train split for training, val for selection (the agent's best chunk by"
        " val balanced accuracy; the baselines' best state and the tiling threshold), test"
        f" ({n_test} frames) only for these figures. Each method had the same wall-clock budget"
        f" in one process (training + its val passes; {threads} torch thread(s)). A seed fixes"
        " the initialisation, the sampling and the environment; the budget is wall-clock, so"
        " the same command on a faster or busier machine trains more or fewer steps and its"
        " figures move with them (the spent steps are in each diagnosis; the models are kept"
        " under runs/quality_magnetic_tile/, which `--rescore` reads).",
        "Pixel fraction = native-resolution pixels examined / frame pixels: the agent's from"
        " `evaluate()` (native glimpses, revisits counted); tiling = all its 32x32 tiles (edge"
        " tiles overlap, hence > 1); the full-frame CNN sees no native pixel (0), only a"
        f" {FULL_SIZE}x{FULL_SIZE} resampling of the frame.",
    ]
    if any(k.startswith("agent_") for k in keys):
        notes.append(
            "Agent variants: each agent row is its own run with the same budget; perception"
            " pretraining is `--agent-perception N` (TrainConfig.perception_samples, native"
            " crops labelled from the train masks), a frozen glimpse CNN `--agent-freeze`"
            " (perception_freeze), more remembered glimpses `--agent-memory N` (the profile's"
            " scan.memory, 4 in magnetic_tile.yaml), the per-glimpse evidence head"
            " `--agent-evidence` (TrainConfig.glimpse_evidence), evidence on the overview"
            " `--agent-overview-evidence` (TrainConfig.overview_evidence), perception crops from"
            " every zoom level `--agent-all-levels` (TrainConfig.perception_levels: all), the"
            " class-balanced verdict loss `--agent-balanced-verdict`, a wider glimpse CNN"
            " `--agent-cnn-channels N` (TrainConfig.cnn_channels, default 8), more pretraining"
            " epochs `--agent-perception-epochs N` (perception_epochs, default 12), the chunk"
            " kept by val defect AUROC rather than val balanced accuracy"
            " `--agent-select-auroc`;"
            " `--methods agent` with"
            " those flags"
            " re-creates one row."
        )
    tiling, full = results.get("tiling"), results.get("fullframe")
    if tiling:
        notes.append(
            f"Tiling: {tiling['tiles_per_frame']:.0f} tiles per test frame, defect threshold"
            f" {tiling['threshold']:.3f} (chosen on val); {tiling['fit']['samples_seen']:,} tiles"
            f" seen in training; train tiles per class {tiling['train_tiles']}."
        )
    if full:
        notes.append(
            f"Full-frame: {full['fit']['samples_seen']:,} frames seen in training"
            f" (best on val at {full['fit']['best_at_s']:.0f} s)."
        )
    goal_lines = [
        "",
        f"Goals (test): defect recall >= {GOALS['defect_recall']} with false-alarm rate <="
        f" {GOALS['false_alarm_rate']}, balanced accuracy >= {GOALS['balanced_accuracy']}, at"
        f" <= {GOAL_PIXELS:.0%} of the tiling baseline's pixels.",
    ]
    for meth in keys:
        r = results[meth]
        g = goals_met(r["test"])
        parts = [f"{k} {'met' if v else 'MISSED'}" for k, v in g.items()]
        if meth.startswith("agent") and tiling:
            rel = r["test"]["pixel_fraction"] / tiling["test"]["pixel_fraction"]
            if rel > GOAL_PIXELS:
                verdict = "MISSED"
            elif all(g.values()):
                verdict = "met"
            else:
                # Few pixels are no achievement while the quality goals are missed: a policy
                # that never zooms in examines almost none.
                verdict = "under the cap, but hollow while the quality goals are missed"
            parts.append(f"pixels {rel:.2%} of tiling's ({verdict})")
        goal_lines.append(f"- {meth}: " + ", ".join(parts))
    for key in (k for k in keys if k.startswith("agent")):
        agent = results[key]
        m = agent["test"]
        curve = ", ".join(
            f"{h['steps']}: {h['balanced_accuracy']:.2f}" for h in agent["history"][-8:]
        )
        conf = m["confusion"]
        conf_rows = "; ".join(
            f"{c} -> " + ",".join(str(v) for v in row) for c, row in zip(m["classes"], conf)
        )
        agent_cfg = agent.get("config") or {}
        bc = agent_cfg.get("bc_samples", 0)
        bc_note = f" after {bc:,} behaviour-cloning steps of the scripted teacher" if bc else ""
        pp = agent_cfg.get("perception_samples", 0)
        if pp:
            frozen = ", then frozen" if agent_cfg.get("perception_freeze") else ""
            native = agent_cfg.get("perception_levels", "native") == "native"
            where = "native" if native else "zoom-level"
            bc_note = f" after perception pretraining on {pp:,} {where} crops{frozen} and" + (
                bc_note.removeprefix(" after") or " no cloning"
            )
        goal_lines += [
            "",
            f"Agent diagnosis ({names.get(key) or agent_name(key)}):"
            f" {agent['steps']:,} env steps{bc_note}, in"
            f" {agent['train_s']:.0f} s of training ({agent['steps_per_s']:.0f} steps/s including"
            " the pretraining), kept chunk: val balanced accuracy"
            f" {agent['best_val']['balanced_accuracy']:.3f}"
            + (
                f" (val AUROC {agent['best_val']['defect_auroc']:.3f})"
                if agent["best_val"].get("defect_auroc") is not None
                else ""
            )
            + f" at {agent['best_val']['steps']:,} steps;"
            f" on test: mean steps {m['mean_steps']:.1f}, mean glimpses {m['mean_glimpses']:.1f},"
            f" native share {m['native_share']:.2f}, stopped (not budget-truncated)"
            f" {m['stopped_share']:.2f}.",
            f"Val balanced accuracy by steps (last chunks): {curve}.",
            f"Test confusion (rows truth, columns verdict, order {', '.join(m['classes'])}):"
            f" {conf_rows}.",
        ]
    seeds = seeds_table(by_seed or {}, names)
    ops = operating_table(op_by_seed or {}, names)
    budget_s = next(iter(results.values()))["budget_s"] if results else None
    others = budgets_table(out_dir, budget_s, names) if out_dir and budget_s else ""
    tiling_px = tiling["test"]["pixel_fraction"] if tiling else None
    ens = ensembles_table(out_dir / "ensembles", names, tiling_px) if out_dir else ""
    return body + "\n".join(notes + goal_lines) + "\n" + seeds + ops + others + ens


def saved_results(out_dir: Path) -> list[tuple[str, int, int, Path]]:
    """Every saved result file ``<key>_s<seed>_<budget>s.json``, as (key, seed, budget
    seconds, path), in file-name order."""
    import re

    pat = re.compile(r"^(.+)_s(\d+)_(\d+)s$")
    out = []
    for path in sorted(out_dir.glob("*_s*_*s.json")):
        m = pat.match(path.stem)
        if m:
            out.append((m[1], int(m[2]), int(m[3]), path))
    return out


def results_by_seed(
    out_dir: Path, budget_s: float, field: str = "test"
) -> dict[str, dict[int, dict]]:
    """One field (default the test metrics) of every saved result of this budget:
    {results key: {seed: value}}; results without the field are left out."""
    out: dict[str, dict[int, dict]] = {}
    for key, seed, budget, path in saved_results(out_dir):
        if budget == round(budget_s):
            value = json.loads(path.read_text()).get(field)
            if value is not None:
                out.setdefault(key, {})[seed] = value
    return out


def _median(vals: Sequence[float | None]) -> str:
    """The median of the values that are there, formatted ("—" when none is)."""
    present = [v for v in vals if v is not None]
    return _f(float(np.median(present))) if present else "—"


def _seed_row(
    label: str,
    runs: dict[int, dict],
    shown: Sequence[tuple[Callable[[dict], Any], int]],
    medians: Sequence[Callable[[dict], Any]],
) -> list[str]:
    """A table row of one method over seeds: its name, the seeds, each seed's ``shown``
    figures (getter, digits) as "seed: a / b / c", then the median of each of ``medians``."""
    runs = dict(sorted(runs.items()))
    per = ", ".join(
        f"{s}: " + " / ".join(_f(get(r), digits) for get, digits in shown) for s, r in runs.items()
    )
    cells = [_median([get(r) for r in runs.values()]) for get in medians]
    return [label, ",".join(str(s) for s in runs), per, *cells]


def operating_table(by_seed: dict[str, dict[int, dict]], names: dict[str, str]) -> str:
    """Markdown: every method's defect AUROC and its test figures at the val-chosen bias
    for the goal's false-alarm ceiling (:func:`operating_point`), per seed and median."""
    keys = ordered_keys(by_seed)
    if not keys:
        return ""

    def at(name: str) -> Callable[[dict], Any]:
        return lambda op: (op.get("test") or {}).get(name)

    def auroc(op: dict) -> Any:
        return op.get("auroc_test")

    recall, fa = at("defect_recall"), at("false_alarm_rate")
    rows = [
        _seed_row(
            names.get(k) or agent_name(k),
            by_seed[k],
            shown=[(auroc, 3), (recall, 2), (fa, 2)],
            medians=[auroc, recall, fa, at("balanced_accuracy")],
        )
        for k in keys
    ]
    ceiling = next(iter(next(iter(by_seed.values())).values()))["false_alarm_ceiling"]
    header = [
        "method",
        "seeds",
        "per seed: test AUROC / recall / false alarms",
        "median AUROC",
        "median recall",
        "median false alarms",
        "median balanced acc",
    ]
    return (
        f"\nAt the goal's operating point (test split): each model's decision shifted by the"
        f" ok bias (`inspector calibrate --max-false-alarms {ceiling:g}`; tiling: its threshold)"
        f" that gives the highest val recall with val false alarms <= {ceiling:g}. AUROC: the"
        " chance that a defective test frame scores above a good one (score 1 - p(ok); tiling:"
        " its top tile's defect probability), free of any threshold. `--rescore` adds this to"
        " saved runs from their models.\n\n" + table(header, rows)
    )


def seeds_table(by_seed: dict[str, dict[int, dict]], names: dict[str, str]) -> str:
    """Markdown: every method run with more than one seed, each seed's figures and the median."""
    keys = [k for k in ordered_keys(by_seed) if len(by_seed[k]) > 1]
    if not keys:
        return ""

    figures = [itemgetter(n) for n in ("balanced_accuracy", "defect_recall", "false_alarm_rate")]
    rows = [
        _seed_row(
            names.get(k) or agent_name(k),
            by_seed[k],
            shown=[(get, 3) for get in figures],
            medians=figures,
        )
        for k in keys
    ]
    header = [
        "method (more than one seed)",
        "seeds",
        "per seed: balanced acc / defect recall / false alarms",
        "median balanced acc",
        "median defect recall",
        "median false alarms",
    ]
    return (
        "\nAcross seeds (same budget, test split; `--seed N` with the row's flags re-creates"
        " each run, `--methods tiling` / `--methods fullframe` each baseline's):\n\n"
        + table(header, rows)
    )


def budgets_table(out_dir: Path, budget_s: float, names: dict[str, str]) -> str:
    """Markdown: the runs saved at other budgets than ``budget_s``, each beside the same
    method and seed at ``budget_s``: does more training time move the figures?

    Per run: test AUROC and recall / false alarms at the goal's operating point (its val-
    chosen bias, as in :func:`operating_table`), then the as-trained balanced accuracy;
    the same for that method and seed at the table's own budget ("—" where missing).
    """
    runs = [
        (key, budget, seed, json.loads(path.read_text()))
        for key, seed, budget, path in saved_results(out_dir)
        if budget != round(budget_s)
    ]
    if not runs:
        return ""

    def figures(r: dict | None) -> str:
        if r is None:
            return "—"
        op = r.get("operating_point") or {}
        at = op.get("test") or {}
        return " / ".join(
            [
                _f(op.get("auroc_test"), 3),
                _f(at.get("defect_recall"), 2),
                _f(at.get("false_alarm_rate"), 2),
                _f(r["test"]["balanced_accuracy"], 3),
            ]
        )

    rows = []
    order = {k: i for i, k in enumerate(ordered_keys({k: None for k, *_ in runs}))}
    for key, budget, seed, r in sorted(runs, key=lambda t: (t[1], order[t[0]], t[2])):
        same = out_dir / f"{key}_s{seed}_{budget_s:.0f}s.json"
        base = json.loads(same.read_text()) if same.exists() else None
        rows.append(
            [
                names.get(key) or agent_name(key),
                str(seed),
                f"{budget / 60:g} / {r['spent_s'] / 60:.0f}",
                figures(r),
                figures(base),
            ]
        )
    header = [
        "method",
        "seed",
        "budget / spent min",
        "test AUROC / recall / false alarms at the operating point / as-trained balanced acc",
        f"the same at {budget_s / 60:g} min",
    ]
    return (
        f"\nOther budgets (each run beside the same method and seed at {budget_s / 60:g} min;"
        " `--budget-min N --seed S` with the row's flags re-creates it; the operating point"
        " as above):\n\n" + table(header, rows)
    )


def agent_tag(
    perception: int = 0,
    freeze: bool = False,
    memory: int = 0,
    evidence: bool = False,
    balanced: bool = False,
    all_levels: bool = False,
    overview_evidence: bool = False,
    cnn_channels: int = 0,
    perception_epochs: int = 0,
    select_auroc: bool = False,
) -> str:
    """The results key suffix of an agent variant (``""``: TrainConfig defaults)."""
    return (
        (f"_c{cnn_channels}" if cnn_channels else "")
        + (f"_pp{perception}" if perception else "")
        + (f"_pe{perception_epochs}" if perception_epochs and perception else "")
        + ("_ms" if all_levels and perception else "")
        + ("_frz" if freeze and perception else "")
        + (f"_m{memory}" if memory else "")
        + ("_ev" if evidence else "")
        + ("_ov" if overview_evidence else "")
        + ("_bal" if balanced else "")
        + ("_sauc" if select_auroc else "")
    )


def variant_profile(memory: int, out: Path) -> str:
    """reward_profiles/magnetic_tile.yaml with ``scan.memory`` replaced, written to ``out``."""
    import yaml

    from inspector.profile import load_profile

    doc = yaml.safe_load(Path(PROFILE).read_text())
    doc["scan"]["memory"] = int(memory)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# {Path(PROFILE).name} with scan.memory {memory} (benchmarks/quality_magnetic_tile.py)\n"
        + yaml.safe_dump(doc, sort_keys=False)
    )
    load_profile(str(out))  # fail here, not after the first chunk
    return str(out)


def agent_name(key: str) -> str:
    """Table words for an agent results key (``agent_pp8000_frz`` ...)."""
    words = []
    for tok in key.split("_")[1:]:
        if tok.startswith("pp"):
            words.append(f"perception pretraining on {int(tok[2:]):,} crops")
        elif tok == "sauc":
            words.append("chunk kept by val AUROC")
        elif tok.startswith("pe") and tok[2:].isdigit():
            words.append(f"{int(tok[2:])} pretraining epochs")
        elif tok.startswith("c") and tok[1:].isdigit():
            words.append(f"glimpse CNN {int(tok[1:])} channels wide")
        elif tok == "frz":
            words.append("glimpse CNN frozen")
        elif tok == "ms":
            words.append("crops from every zoom level")
        elif tok == "ev":
            words.append("per-glimpse evidence head")
        elif tok == "ov":
            words.append("evidence on the overview")
        elif tok == "bal":
            words.append(f"balanced verdict loss (stop weight {BALANCED_STOP_WEIGHT:g})")
        elif tok.startswith("m") and tok[1:].isdigit():
            words.append(f"{int(tok[1:])} remembered glimpses")
        else:
            words.append(tok)
    return "agent (HybridPPO, scripted teacher" + "".join(f", {w}" for w in words) + ")"


def ordered_keys(results: dict[str, dict]) -> list[str]:
    """Agent variants first (defaults, then by tag), then the baselines."""
    agents = sorted((k for k in results if k.startswith("agent")), key=lambda k: (len(k), k))
    return agents + [m for m in METHODS if m != "agent" and m in results]


def rescore(
    out_dir: Path,
    runs_dir: Path,
    suffix: str,
    root: Path,
    frames: Callable[[str], list[Sample]],
    force: bool = False,
) -> None:
    """Add :func:`operating_point` to the saved results ending in ``suffix`` whose models
    are still there (agents: their ``best/`` run; baselines: ``<method>_s<seed>_<budget>s.pt``,
    or ``<method>_s<seed>.pt`` as saved at the default budget before budgets varied)."""
    import torch

    from inspector.profile import load_profile

    profile = load_profile(PROFILE)
    classes, ok_class = list(profile.classes), profile.ok_class
    for path in sorted(out_dir.glob(f"*{suffix}.json")):
        r = json.loads(path.read_text())
        key = path.stem.removesuffix(suffix)
        if r.get("operating_point") and not force:
            continue
        if key.startswith("agent"):
            model = ROOT / r.get("model", "")
            if not (model / "model.zip").is_file():
                print(f"rescore: {key}: no saved model at {model}; left as it is")
                continue
            op = agent_operating_point(model, root)
        elif key in ("tiling", "fullframe"):
            pt = runs_dir / f"{key}{suffix}.pt"
            legacy = runs_dir / f"{key}{suffix.rsplit('_', 1)[0]}.pt"  # before budgets varied
            if not pt.is_file() and suffix.endswith("_1200s") and legacy.is_file():
                pt = legacy
            if not pt.is_file():
                print(f"rescore: {key}: no saved net {pt}; left as it is")
                continue
            net = make_net(len(classes))
            net.load_state_dict(torch.load(pt, map_location="cpu", weights_only=True))
            net.eval()
            val, test = frames("val"), frames("test")
            thr = r.get("threshold", 0.5)
            op = baseline_operating_point(key, net, val, test, classes, ok_class, thr)
        else:
            continue
        saved, now = r["test"]["balanced_accuracy"], op["test_as_run"]["balanced_accuracy"]
        if abs(saved - now) > 1e-6:
            print(
                f"rescore: {key}: its saved model gives test balanced accuracy {now:.4f}, the"
                f" saved result {saved:.4f}: not the model behind it; left as it is"
            )
            continue
        r["operating_point"] = op
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(r, indent=1))
        tmp.replace(path)
        t = op.get("test") or {}
        print(
            f"rescore: {key}: test AUROC {_f(op['auroc_test'])}; at val false alarms <="
            f" {op['false_alarm_ceiling']:g}: recall {_f(t.get('defect_recall'))}, false"
            f" alarms {_f(t.get('false_alarm_rate'))}"
        )


def _public(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if not k.startswith("_")}


def seed_list(text: str) -> list[int]:
    """argparse type: "0,1,2" -> [0, 1, 2] (two or more different non-negative seeds)."""
    try:
        seeds = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1, got {text!r}") from None
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(
            f"expected two or more different non-negative seeds, got {text!r}"
        )
    return seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2.5 min a method (< 10 min in all)")
    ap.add_argument("--budget-min", type=float, help="minutes a method (default 20, quick 2.5)")
    ap.add_argument("--seed", type=int, default=0, help="seed of all three methods (default 0)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (at most 2)")
    ap.add_argument("--data", help="magnetic-tile folder (default: inspector.datasets)")
    ap.add_argument("--force", action="store_true", help="rerun methods whose results exist")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    ap.add_argument(
        "--agent-perception",
        type=non_negative_int,
        default=0,
        help="the agent first pretrains its glimpse CNN on this many mask-labelled native"
        " crops of the train split (TrainConfig.perception_samples; inside its budget)",
    )
    ap.add_argument(
        "--agent-freeze",
        action="store_true",
        help="keep the agent's glimpse CNN fixed after that (TrainConfig.perception_freeze)",
    )
    ap.add_argument(
        "--agent-memory",
        type=non_negative_int,
        default=0,
        help="glimpses the agent's observation remembers (the profile's scan.memory, default 4)",
    )
    ap.add_argument(
        "--agent-evidence",
        action="store_true",
        help="the agent's per-glimpse evidence head (TrainConfig.glimpse_evidence;"
        " pretrained with --agent-perception)",
    )
    ap.add_argument(
        "--agent-balanced-verdict",
        action="store_true",
        help="class-balanced verdict cross-entropy, stop steps weighted"
        f" {BALANCED_STOP_WEIGHT:g} (TrainConfig.verdict_balance / verdict_stop_weight)",
    )
    ap.add_argument(
        "--agent-all-levels",
        action="store_true",
        help="perception crops from every zoom level, not only native"
        " (TrainConfig.perception_levels: all; needs --agent-perception)",
    )
    ap.add_argument(
        "--agent-overview-evidence",
        action="store_true",
        help="the evidence head judges the overview too (TrainConfig.overview_evidence;"
        " needs --agent-evidence)",
    )
    ap.add_argument(
        "--rescore",
        action="store_true",
        help="add the goal's operating point to this seed's saved results from their saved"
        " models (agents' best/, the baselines' .pt), training nothing",
    )
    ap.add_argument(
        "--agent-select-auroc",
        action="store_true",
        help="keep the chunk with the best val defect AUROC (default: val balanced accuracy)",
    )
    ap.add_argument(
        "--reselect",
        action="store_true",
        help="with --agent-select-auroc: derive that run from the saved one with the same"
        " flags (kept by val balanced accuracy), re-picking among its chunk checkpoints"
        " (training does not depend on the choice), training nothing",
    )
    ap.add_argument(
        "--agent-perception-epochs",
        type=non_negative_int,
        default=0,
        help="epochs of that pretraining (TrainConfig.perception_epochs; 0: its default, 12)",
    )
    ap.add_argument(
        "--agent-cnn-channels",
        type=non_negative_int,
        default=0,
        help="width of the agent's glimpse CNN (TrainConfig.cnn_channels; 0: its default, 8)",
    )
    ap.add_argument(
        "--ensemble-seeds",
        type=seed_list,
        help="comma-separated seeds, lead first (e.g. 0,1): score the verdict ensemble of the"
        " saved agent runs with the agent flags and --budget-min given, training nothing",
    )
    args = ap.parse_args(argv)
    if args.agent_all_levels and not args.agent_perception:
        ap.error("--agent-all-levels needs --agent-perception N (it chooses the crops' levels)")
    if args.agent_overview_evidence and not args.agent_evidence:
        ap.error("--agent-overview-evidence needs --agent-evidence (the head it reuses)")
    if args.reselect and not args.agent_select_auroc:
        ap.error("--reselect needs --agent-select-auroc (the choice it re-makes)")
    if args.agent_perception_epochs and not args.agent_perception:
        ap.error("--agent-perception-epochs needs --agent-perception N (the pretraining it sets)")
    if args.agent_freeze and not args.agent_perception:
        ap.error("--agent-freeze needs --agent-perception N (there is nothing pretrained to keep)")
    import torch

    from inspector.datasets import magnetic_tile_root
    from inspector.profile import load_profile

    torch.set_num_threads(max(1, min(2, args.threads)))
    torch.set_num_interop_threads(1)
    root = Path(args.data) if args.data else magnetic_tile_root()
    if root is None or not (root / "splits.csv").is_file():
        print("magnetic-tile footage not found: set INSPECTOR_DATA or pass --data", file=sys.stderr)
        return 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        print(f"unknown method(s) {unknown}; expected {', '.join(METHODS)}", file=sys.stderr)
        return 2
    mode = "quick" if args.quick else "full"
    budget_s = 60.0 * (args.budget_min or (2.5 if args.quick else 20.0))
    every = 15.0 if args.quick else 60.0
    out_dir = RESULTS / mode
    out_dir.mkdir(parents=True, exist_ok=True)
    profile = load_profile(PROFILE)
    classes, ok_class = list(profile.classes), profile.ok_class
    data: dict[str, list[Sample]] = {}

    def frames(split: str) -> list[Sample]:
        if split not in data:
            t = time.perf_counter()
            data[split] = load_split(root, split)
            print(f"loaded {len(data[split])} {split} frames in {time.perf_counter() - t:.1f} s")
        return data[split]

    results: dict[str, dict] = {}
    if args.rescore:
        rescore(out_dir, RUNS / mode, f"_s{args.seed}_{budget_s:.0f}s", root, frames, args.force)
    tag = agent_tag(
        args.agent_perception,
        args.agent_freeze,
        args.agent_memory,
        args.agent_evidence,
        args.agent_balanced_verdict,
        args.agent_all_levels,
        args.agent_overview_evidence,
        args.agent_cnn_channels,
        args.agent_perception_epochs,
        args.agent_select_auroc,
    )
    if args.ensemble_seeds:
        key = "agent" + tag
        path = ensemble_path(out_dir, key, args.ensemble_seeds, budget_s)
        if args.force or not path.exists():
            print(f"{key}: verdict ensemble of seeds {args.ensemble_seeds}", flush=True)
            r = run_ensemble(out_dir, RUNS / mode, key, args.ensemble_seeds, budget_s, root)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(r, indent=1))
            op = r["operating_point"]
            print(
                f"  ensemble test: AUROC {_f(op['auroc_test'])}, at the val-chosen bias recall"
                f" {_f((op.get('test') or {}).get('defect_recall'))}, false alarms"
                f" {_f((op.get('test') or {}).get('false_alarm_rate'))}; pixel fraction"
                f" {r['test']['pixel_fraction']:.4f}",
                flush=True,
            )
    suffix = f"_s{args.seed}_{budget_s:.0f}s"
    for meth in METHODS:
        key = meth + tag if meth == "agent" else meth
        path = out_dir / f"{key}{suffix}.json"
        if path.exists() and not args.force:
            results[key] = json.loads(path.read_text())
            continue
        if meth not in methods:
            continue
        print(f"{key}: {budget_s:.0f} s budget, seed {args.seed}", flush=True)
        if meth == "agent" and args.reselect:
            r = reselect(out_dir, RUNS / mode, key.removesuffix("_sauc"), suffix, root)
        elif meth == "agent":
            run_dir = RUNS / mode / f"{key}{suffix}"
            if args.force and run_dir.exists():
                shutil.rmtree(run_dir)
            chunk = 2048 if args.quick else 16384
            cfg = agent_config(
                args.seed,
                perception_samples=args.agent_perception,
                perception_freeze=args.agent_freeze,
                glimpse_evidence=args.agent_evidence,
                overview_evidence=args.agent_overview_evidence,
                perception_levels="all" if args.agent_all_levels else "native",
                **({"cnn_channels": args.agent_cnn_channels} if args.agent_cnn_channels else {}),
                **(
                    {"perception_epochs": args.agent_perception_epochs}
                    if args.agent_perception_epochs
                    else {}
                ),
                **(
                    {"verdict_balance": True, "verdict_stop_weight": BALANCED_STOP_WEIGHT}
                    if args.agent_balanced_verdict
                    else {}
                ),
            )
            prof_path = (
                variant_profile(args.agent_memory, run_dir / "profile_variant.yaml")
                if args.agent_memory
                else PROFILE
            )
            r = run_agent(
                root,
                budget_s,
                args.seed,
                run_dir,
                chunk=chunk,
                cfg=cfg,
                profile_path=prof_path,
                select="defect_auroc" if args.agent_select_auroc else "balanced_accuracy",
            )
        else:
            run = run_tiling if meth == "tiling" else run_fullframe
            r = run(
                frames("train"),
                frames("val"),
                frames("test"),
                budget_s,
                args.seed,
                classes,
                ok_class,
                select_every_s=every,
            )
            net_dir = RUNS / mode
            net_dir.mkdir(parents=True, exist_ok=True)
            torch.save(r["_net"].state_dict(), net_dir / f"{meth}{suffix}.pt")
        r = _public(r)
        path.write_text(json.dumps(r, indent=1))
        m = r["test"]
        print(
            f"  {meth} test: bal.acc {m['balanced_accuracy']:.3f}, defect recall "
            f"{_f(m['defect_recall'])}, false alarms {_f(m['false_alarm_rate'])}, "
            f"pixel fraction {m['pixel_fraction']:.4f}, {r['spent_s']:.0f} s",
            flush=True,
        )
        results[key] = r
    # Every other saved agent variant of this seed and budget goes in the table too.
    for other in sorted(out_dir.glob(f"agent*{suffix}.json")):
        results.setdefault(other.stem.removesuffix(suffix), json.loads(other.read_text()))
    body = report(
        results,
        mode,
        classes,
        ok_class,
        threads=max(1, min(2, args.threads)),
        by_seed=results_by_seed(out_dir, budget_s),
        op_by_seed=results_by_seed(out_dir, budget_s, "operating_point"),
        out_dir=out_dir,
    )
    print(body)
    have_all = all((m + tag if m == "agent" else m) in results for m in METHODS)
    if not args.no_write and have_all:
        cmd = "python -m benchmarks.quality_magnetic_tile" + (" --quick" if args.quick else "")
        if args.budget_min:
            cmd += f" --budget-min {args.budget_min:g}"
        cmd += f" --seed {args.seed}"
        write_section(
            "quality_magnetic_tile",
            "Quality on real footage (magnetic tiles): agent vs tiling vs full-frame CNN",
            body,
            command=cmd,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
