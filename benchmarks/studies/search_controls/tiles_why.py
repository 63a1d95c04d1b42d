"""Section 4b: why native glimpses lower the trained heads on the magnetic tiles.

One pass per model over the val and test frames records, per frame and per step, the
verdict head's class probabilities under several conditions, so that aggregations
(:mod:`.tiles_why_report`) are tried offline without driving the models again:

* ``ov``: the overview alone (the observation at reset);
* ``agent``: the learned agent's own episode, with the zoom level and the defect pixels
  of every glimpse (so "stop before the first native glimpse" is read off it);
* ``acc``: ``k`` native glimpses at random positions (seeded per frame), one after the
  other as the fixed scans place them (the scanner's 4-slot memory as it is);
* ``keep``: the same glimpses with the overview's glimpse held in the memory's last slot
  (its geometry too): does the memory pushing the overview out cost the evidence?
* ``alone``: each of those glimpses on its own after the overview (reset, one glimpse):
  the glimpse's evidence without what came before it;
* ``oracle``: on a defective frame, the native viewport holding the most defect pixels
  (from the footage's mask), alone after the overview: can the head read a defect at
  native resolution when it is shown one?

* ``mid_alone`` / ``mid_acc`` / ``mid_oracle``: the same at the middle zoom level (the
  agent's first zoom), over the frame's tiling at that level, and its best-placed
  middle-level viewport;
* ``agent_keep``: the verdict along the agent's own trajectory read with the overview's
  glimpse held in the memory (the agent still moves on the memory as it is).

Each glimpse's defect pixels (from the mask) are kept with it. Nothing is trained; the
models are read as :mod:`.tiles` reads them. Results: one ``.npz`` per model, written
when the model is done (a stopped run resumes at the next model).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.search_controls.drivers import (
    random_positions,
    raster_positions,
    tile_count,
)

#: The folder (beside the ``tiles`` evaluations) that holds the per-model records.
FOLDER = "tiles_why"
#: Native glimpses per frame in the random conditions.
K_NATIVE = 8
#: The record's layout (a record of an older layout is made again).
VERSION = 2


def _defect_pixels(mask: np.ndarray | None, rect: tuple[int, int, int, int]) -> int:
    if mask is None:
        return 0
    x0, y0, x1, y1 = rect
    return int(mask[y0:y1, x0:x1].sum())


def _oracle_centre(mask: np.ndarray, cw: int, ch: int) -> tuple[float, float]:
    """Centre (normalised) of the native viewport holding the most defect pixels."""
    import cv2

    h, w = mask.shape
    dens = cv2.boxFilter(mask.astype(np.float32), -1, (cw, ch), normalize=False)
    # Keep the viewport inside the frame: only centres at least half a viewport in.
    y_lo, y_hi = ch // 2, max(ch // 2 + 1, h - (ch - ch // 2) + 1)
    x_lo, x_hi = cw // 2, max(cw // 2 + 1, w - (cw - cw // 2) + 1)
    sub = dens[y_lo:y_hi, x_lo:x_hi]
    j, i = np.unravel_index(int(np.argmax(sub)), sub.shape)
    return (x_lo + i) / w, (y_lo + j) / h


def _kept(obs: dict, ov_glimpse: np.ndarray, memory: int) -> dict:
    """``obs`` with the overview's glimpse (and its geometry) in the memory's last slot."""
    out = {k: v.copy() for k, v in obs.items()}
    out["glimpse"][-1] = ov_glimpse
    out["state"][-5:] = (0.0, 0.0, 1.0, 1.0, 0.0)
    assert memory == out["glimpse"].shape[0]
    return out


def record_frame(policy: Any, scanner: Any, frame: Any, rng: np.random.Generator, k: int) -> dict:
    """Every condition of the module doc on one frame."""
    image = frame.image
    obs = scanner.reset(image)
    mask = frame.truth.defect_mask(scanner.image.shape[:2])
    ov_glimpse = obs["glimpse"][0].copy()
    memory = obs["glimpse"].shape[0]
    p_ov = policy.act(obs)[1]
    # The agent's own episode.
    budget = scanner.budget
    a_probs, a_keep, a_level, a_def, stop = [], [], [], [], -1
    for t in range(budget + 1):
        a, p = policy.act(obs)
        a_probs.append(p)
        a_keep.append(policy.act(_kept(obs, ov_glimpse, memory))[1])
        a_level.append(scanner.level)
        a_def.append(_defect_pixels(mask, scanner.rect))
        if t == budget:
            break
        if a == scanner.stop:
            stop = t
            break
        obs, _, _ = scanner.step(a)
    # Random native glimpses: accumulated, with the overview kept, alone.
    h, w = scanner.image.shape[:2]
    native = scanner.levels - 1
    cw, ch = scanner.crop_size(native)
    pos = random_positions(rng, w, h, cw, ch, k)
    acc, keep, alone, g_def = [], [], [], []
    scanner.reset(image)
    for cx, cy in pos:
        scanner.look_at(native, cx, cy)
        scanner.steps += 1
        o = scanner.observation()
        acc.append(policy.act(o)[1])
        keep.append(policy.act(_kept(o, ov_glimpse, memory))[1])
        g_def.append(_defect_pixels(mask, scanner.rect))
    for cx, cy in pos:
        scanner.reset(image)
        scanner.look_at(native, cx, cy)
        scanner.steps += 1
        alone.append(policy.act(scanner.observation())[1])
    oracle, o_def = np.full_like(p_ov, np.nan), 0
    if mask is not None and mask.any():
        scanner.reset(image)
        scanner.look_at(native, *_oracle_centre(mask, cw, ch))
        scanner.steps += 1
        oracle = policy.act(scanner.observation())[1]
        o_def = _defect_pixels(mask, scanner.rect)
    mid = _middle_level(policy, scanner, image, mask)
    return {
        **mid,
        "agent_keep": np.asarray(a_keep),
        "ov": p_ov,
        "agent": np.asarray(a_probs),
        "agent_level": np.asarray(a_level),
        "agent_def": np.asarray(a_def),
        "stop": stop,
        "acc": np.asarray(acc),
        "keep": np.asarray(keep),
        "alone": np.asarray(alone),
        "glimpse_def": np.asarray(g_def),
        "oracle": oracle,
        "oracle_def": o_def,
        "native_px": cw * ch,
        "defect_px": int(mask.sum()) if mask is not None else 0,
    }


def _middle_level(policy: Any, scanner: Any, image: np.ndarray, mask) -> dict:
    """The middle zoom level (the agent's first zoom): the frame's tiling at that level,
    each tile alone after the overview (``mid_alone``) and one after the other
    (``mid_acc``), their defect pixels, and the middle-level viewport holding the most
    defect pixels alone (``mid_oracle``)."""
    level = max(0, scanner.levels - 2)
    scanner.reset(image)
    h, w = scanner.image.shape[:2]
    cw, ch = scanner.crop_size(level)
    pos = raster_positions(w, h, cw, ch)[: tile_count(w, h, cw, ch)]
    acc, alone, dp = [], [], []
    for cx, cy in pos:
        scanner.look_at(level, cx, cy)
        scanner.steps += 1
        acc.append(policy.act(scanner.observation())[1])
        dp.append(_defect_pixels(mask, scanner.rect))
    for cx, cy in pos:
        scanner.reset(image)
        scanner.look_at(level, cx, cy)
        scanner.steps += 1
        alone.append(policy.act(scanner.observation())[1])
    oracle = np.full_like(acc[0], np.nan)
    if mask is not None and mask.any():
        scanner.reset(image)
        scanner.look_at(level, *_oracle_centre(mask, cw, ch))
        scanner.steps += 1
        oracle = policy.act(scanner.observation())[1]
    return {
        "mid_acc": np.asarray(acc),
        "mid_alone": np.asarray(alone),
        "mid_def": np.asarray(dp),
        "mid_oracle": oracle,
    }


def record_split(policy: Any, frames: Sequence[Any], seed: int, k: int = K_NATIVE) -> dict:
    """:func:`record_frame` on every frame, stacked (the agent padded with its decision)."""
    from inspector.scan import Scanner

    meta = policy.meta
    budget = int(meta.step_budget)
    scanner = Scanner.from_metadata(meta, budget)
    idx = {c: i for i, c in enumerate(meta.classes)}
    recs = [
        record_frame(policy, scanner, f, np.random.default_rng([seed, n]), k)
        for n, f in enumerate(frames)
    ]

    def pad(key: str) -> np.ndarray:
        rows = [r[key] for r in recs]
        return np.stack(
            [np.concatenate([r, np.repeat(r[-1:], budget + 1 - len(r), 0)]) for r in rows]
        )

    def nan_pad(key: str) -> np.ndarray:
        rows = [np.asarray(r[key], dtype=np.float64) for r in recs]
        n = max(len(r) for r in rows)
        return np.stack(
            [np.concatenate([r, np.full((n - len(r), *r.shape[1:]), np.nan)]) for r in rows]
        )

    out = {
        "labels": np.asarray([idx[f.truth.label] for f in frames]),
        "agent": pad("agent"),
        "agent_keep": pad("agent_keep"),
        "mid_acc": nan_pad("mid_acc"),
        "mid_alone": nan_pad("mid_alone"),
        "mid_def": nan_pad("mid_def"),
        "mid_n": np.asarray([len(r["mid_def"]) for r in recs]),
        "mid_oracle": np.stack([r["mid_oracle"] for r in recs]),
        "agent_level": pad("agent_level"),
        "agent_def": pad("agent_def"),
        "agent_len": np.asarray([len(r["agent"]) for r in recs]),
    }
    for key in ("ov", "stop", "acc", "keep", "alone", "glimpse_def", "oracle", "oracle_def"):
        out[key] = np.stack([np.asarray(r[key]) for r in recs])
    for key in ("native_px", "defect_px"):
        out[key] = np.asarray([r[key] for r in recs])
    return out


#: Conditions kept as p(free) alone (the defect score is all the report reads of them).
SCORE_ONLY = ("acc", "keep", "alone", "agent_keep", "mid_acc", "mid_alone", "mid_oracle")


def compact(key: str, v: np.ndarray) -> np.ndarray:
    """What is saved of one recorded array: floats as float16, and only the p(free)
    column of the :data:`SCORE_ONLY` conditions (the records stay small)."""
    if key in SCORE_ONLY:
        v = v[..., :1]
    return v.astype(np.float16) if v.dtype.kind == "f" else v


def record_models(
    run: Path, root: Path, out: Path, names: Sequence[str], seed: int = 0, limit=None
) -> list[str]:
    """Record each named model of ``run`` on val and test into ``out/tiles_why/<name>.npz``
    (a model already recorded with the same settings is skipped)."""
    from benchmarks.studies.search_controls.tiles import (
        SPLITS,
        load_model,
        model_dirs,
        split_frames,
    )

    models = model_dirs(run)
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    done, frames = [], {}
    for name in (n for n in names if n in models):
        path = folder / f"{name}.npz"
        cfg = {
            "model": name,
            "run": run.name,
            "seed": seed,
            "k": K_NATIVE,
            "limit": limit,
            "version": VERSION,
        }
        if path.is_file():
            with np.load(path) as z:
                if json.loads(str(z["config"])) == cfg:
                    continue
        if not frames:
            frames = {s: split_frames(root, s, limit) for s in SPLITS}
        t0 = time.perf_counter()
        print(f"tiles_why: recording {name}", flush=True)
        policy = load_model(models[name])
        arrays: dict[str, np.ndarray] = {}
        for s in SPLITS:
            rec = record_split(policy, frames[s], seed + (0 if s == "val" else 1))
            for key, v in rec.items():
                arrays[f"{s}/{key}"] = compact(key, v)
        policy.close()
        arrays["classes"] = np.asarray(list(policy.meta.classes))
        arrays["levels"] = np.asarray(int(policy.meta.scan["zoom_levels"]))
        arrays["config"] = np.asarray(json.dumps(cfg))
        arrays["measured"] = np.asarray(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
        done.append(name)
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from benchmarks import harness
    from benchmarks.studies.search_controls.tiles import DEFAULT_RUN

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None)
    ap.add_argument("--models", default="student,ensemble")
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--frames", type=int, default=None, help="frames per class and split")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    root = args.data or harness.magnetic_tile_root()
    run = args.run or harness.ROOT / DEFAULT_RUN
    out = args.out or harness.ROOT / "benchmarks" / "results" / "search_controls" / "full"
    record_models(run, Path(root), out, args.models.split(","), args.seed, args.frames)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
