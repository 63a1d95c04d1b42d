"""Section 1b: the controls at equal glimpses on the magnetic-tile footage.

The same drivers as the quadrants task (:mod:`.drivers`), on frames from the ``folder``
camera and on models trained by ``train --preset footage --members N`` (its members
and its distilled student; the ensemble of the members too when asked): the models are
read, never trained here.

What changes with the footage is the geometry. A magnetic-tile frame (118 to 620
pixels a side) holds some 40 to 220 native viewports of the profile (32 x 32 frame
pixels at the deepest zoom), against 4 on the quadrants panels, and varies from frame to
frame; the agent's step budget (16) covers a few of them. So on each frame:

* ``raster``: the frame's own native tiling (:func:`.drivers.raster_positions`, the
  tiles row by row), one glimpse per tile, run to the whole tiling: its first k
  glimpses are the raster of k (a frame whose tiling is shorter than k keeps its
  decision at its last tile), its end the exhaustive tiling, and the tiling with a
  confidence stop reads the same probabilities (:func:`.analysis.tiling_stop`);
* ``random``: native glimpses at random positions (seeded per frame), as many as
  ``random_max`` (default: the step budget less one, the fixed scans' budget on the
  quadrants task);
* ``agent``: the learned agent's own episode, and its trajectory cut after b actions.

The walk through the agent's own moves (the quadrants task's ``walk``) is left out: a
half-viewport move is 16 pixels here, so a walk spends its whole budget reaching a
corner of the frame before it starts to cover it.

Each model's figures are saved as they finish (:func:`evaluate_models`), so a stopped
run resumes at the next model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.search_controls.drivers import (
    _padded,
    agent_scan,
    fixed_scan,
    max_pooled,
    random_positions,
    raster_positions,
    tile_count,
)

#: The folder (under a mode's results) that holds one evaluation per model.
FOLDER = "tiles"
#: The trained run the section reads by default (``train --preset footage --members 4``,
#: seed 0, as the members_cost study records it).
DEFAULT_RUN = Path("runs") / "members_cost" / "tiles_m4_s0"
#: Models of a run in the order they are evaluated (the student first: the product's
#: one deployable model of such a run).
MODEL_ORDER = ("student", "m0", "m1", "m2", "m3", "ensemble")
SPLITS = ("val", "test")


def model_dirs(run: Path) -> dict[str, Path]:
    """The models of a ``train --members`` run folder: student, members, ensemble."""
    from inspector.train.students import kept_student

    out: dict[str, Path] = {}
    student = kept_student(run)
    if (student / "model.zip").is_file():
        out["student"] = student
    for m in sorted((run / "members").glob("m*")) if (run / "members").is_dir() else []:
        if (m / "model.zip").is_file():
            out[m.name] = m
    if (run / "ensemble" / "ensemble.json").is_file():
        out["ensemble"] = run / "ensemble"
    return out


def load_model(path: Path) -> Any:
    """A trained run (or an ensemble folder) as a :class:`~inspector.policy.base.Policy`,
    the way ``eval`` loads it (torch, no unpickling)."""
    from inspector.train.distill import ensemble_policy, is_ensemble_dir
    from inspector.train.torch_policy import load_any_policy

    if is_ensemble_dir(path):
        return ensemble_policy(path)
    return load_any_policy(path)


def split_frames(root: Path, split: str, limit: int | None = None) -> list[Any]:
    """The labelled frames of one split of the manifest (``splits.csv``), in its order.

    :param limit: keep the first ``limit`` frames of every class (small runs and tests;
        None: all of them).
    """
    from inspector.camera import open_camera

    cam = open_camera("folder", {"path": str(root), "manifest": "splits.csv", "split": split})
    out, seen = [], {}
    # With a limit, pick the frames by their listed label before decoding any image.
    listed = [getattr(r, "label", None) for r in getattr(cam, "records", [])]
    if limit is not None and len(listed) == len(cam) and None not in listed:
        keep, count = [], {}
        for i, label in enumerate(listed):
            if count.get(label, 0) < limit:
                count[label] = count.get(label, 0) + 1
                keep.append(i)
    else:
        keep = range(len(cam))
    try:
        for i in keep:
            f = cam.load(i)
            if f is None or f.truth is None:
                continue
            label = f.truth.label
            if limit is not None and seen.get(label, 0) >= limit:
                continue
            seen[label] = seen.get(label, 0) + 1
            out.append(f)
    finally:
        cam.close()
    return out


def drive_frames(
    policy: Any,
    frames: Iterable[Any],
    seed: int = 0,
    random_max: int | None = None,
    raster_max: int | None = None,
) -> dict:
    """The footage's drivers on every frame, in :func:`.drivers.drive`'s output format
    (what :func:`.analysis.curves` scores), without the walk.

    :param seed: seeds the random scan (per frame: ``seed``, frame index).
    :param random_max: glimpses of the random scan (default: step budget less one).
    :param raster_max: cap on the raster's glimpses (default: the frame's whole tiling;
        a cap below it also cuts the tiling and its confidence stop there).
    """
    from inspector.scan import Scanner

    meta = policy.meta
    budget = int(meta.step_budget)
    scanner = Scanner.from_metadata(meta, budget)
    idx = {c: i for i, c in enumerate(meta.classes)}
    kr = budget - 1 if random_max is None else int(random_max)
    labels, tiles = [], []
    per: dict[str, dict[str, list]] = {
        d: {"probs": [], "glimpses": [], "pixel_fraction": []} for d in ("raster", "random")
    }
    agent: dict[str, list] = {"probs": [], "glimpses": [], "pixel_fraction": [], "stop": []}
    for n, frame in enumerate(frames):
        labels.append(idx[frame.truth.label])
        scanner.reset(frame.image)
        h, w = scanner.image.shape[:2]
        cw, ch = scanner.crop_size(scanner.levels - 1)
        n_tiles = tile_count(w, h, cw, ch)
        k = n_tiles if raster_max is None else min(int(raster_max), n_tiles)
        tiles.append(k)
        rng = np.random.default_rng([seed, n])
        plans = {
            "raster": raster_positions(w, h, cw, ch)[:k],
            "random": random_positions(rng, w, h, cw, ch, kr),
        }
        for d, pos in plans.items():
            r = fixed_scan(policy, scanner, frame.image, pos)
            for key in per[d]:
                per[d][key].append(r[key])
        r = agent_scan(policy, scanner, frame.image, budget)
        for key in agent:
            agent[key].append(r[key])
    out: dict[str, Any] = {"labels": np.asarray(labels), "tiles": np.asarray(tiles)}
    raster = per["raster"]
    # The tiling is the raster run to the frame's last tile.
    out["tiling"] = {
        "last": np.stack([p[-1] for p in raster["probs"]]),
        "max": np.stack([max_pooled(p)[-1] for p in raster["probs"]]),
        "glimpses": np.asarray([g[-1] for g in raster["glimpses"]]),
        "pixel_fraction": np.asarray([f[-1] for f in raster["pixel_fraction"]]),
    }
    for d, arrays in per.items():
        out[d] = {key: _padded(v) for key, v in arrays.items()}
    out["agent"] = {key: _padded(agent[key], budget + 1) for key in agent if key != "stop"}
    out["agent"]["stop"] = np.asarray(agent["stop"])
    return out


def same_width(*parts: dict) -> None:
    """Pad the fixed scans of every split to the same number of glimpses (in place): each
    split's raster runs to its own largest tiling, and :func:`.analysis.curves` reads
    glimpse k of val and test alike."""
    for d in ("raster", "random"):
        n = max(p[d]["probs"].shape[1] for p in parts)
        for p in parts:
            p[d] = {key: _padded(list(v), n) for key, v in p[d].items()}


def class_counts(labels: np.ndarray, classes: Sequence[str]) -> dict[str, int]:
    """Frames per class name."""
    return {c: int((labels == i).sum()) for i, c in enumerate(classes)}


def evaluate_models(
    run: Path,
    root: Path,
    out: Path,
    names: Sequence[str],
    config: dict,
    save,
) -> list[str]:
    """Drive each named model of ``run`` on the val and test splits; save each model's
    rows to ``out/tiles/<name>.json`` as soon as it is done (a saved one is skipped
    when its configuration matches).

    :param config: the run's settings (``limit``, ``random_max``, ``raster_max``,
        ``seed``); saved with each result, and a result saved with other settings is
        driven again.
    :param save: ``save(path, config, result)`` (the study's :func:`training.save_result`).
    :returns: the names evaluated in this call.
    """
    from benchmarks.studies.search_controls import analysis

    models = model_dirs(run)
    missing = [n for n in names if n not in models]
    if missing:
        print(f"tiles: no model {', '.join(missing)} in the run; skipped", flush=True)
    done, frames = [], {}
    for name in (n for n in names if n in models):
        path = out / FOLDER / f"{name}.json"
        cfg = {**config, "kind": "tiles", "model": name, "run": run.name}
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved.get("benchmark", {}).get("config") == json.loads(json.dumps(cfg)):
                continue
        if not frames:
            frames = {s: split_frames(root, s, config.get("limit")) for s in SPLITS}
        print(f"tiles: driving {name}", flush=True)
        t0 = time.perf_counter()
        policy = load_model(models[name])
        parts = {
            s: drive_frames(
                policy,
                frames[s],
                seed=config["seed"] + (0 if s == "val" else 1),
                random_max=config.get("random_max"),
                raster_max=config.get("raster_max"),
            )
            for s in SPLITS
        }
        same_width(parts["val"], parts["test"])
        rows = analysis.curves(parts["val"], parts["test"], policy.meta.outcome_matrix)
        test = parts["test"]
        result = {
            "name": name,
            "classes": list(policy.meta.classes),
            "frames": {s: class_counts(parts[s]["labels"], policy.meta.classes) for s in SPLITS},
            "tiles": {
                "median": float(np.median(test["tiles"])),
                "min": int(test["tiles"].min()),
                "max": int(test["tiles"].max()),
            },
            "step_budget": int(policy.meta.step_budget),
            "model_sha256": policy.meta.model_sha256 or None,
            "ensemble": list(policy.meta.ensemble),
            "rows": rows,
            "wall_s": time.perf_counter() - t0,
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        policy.close()
        save(path, cfg, result)
        done.append(name)
        agent = next(r for r in rows if r["driver"] == "agent")
        print(
            f"  {name}: agent {agent['glimpses']:.2f} glimpses, recall {agent['recall']:.3f}"
            f" at <= 5 % FA; {result['wall_s']:.0f} s",
            flush=True,
        )
    return done


def load_evals(out: Path) -> dict[str, dict]:
    """The saved per-model evaluations of a mode's results folder, in :data:`MODEL_ORDER`."""
    folder = out / FOLDER
    found = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    order = {n: i for i, n in enumerate(MODEL_ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


# -- the study's command line -------------------------------------------------------------
def tiles_options(ap: Any) -> None:
    """The ``tiles`` section's options on the study's argument parser."""
    ap.add_argument(
        "--tiles-run",
        type=Path,
        help=f"the train --members run folder to drive (default {DEFAULT_RUN})",
    )
    ap.add_argument(
        "--tiles-models",
        help="models of the run to drive, comma-separated (default student,m0,m1,m2,m3;"
        " quick: student; 'ensemble' drives the members' ensemble)",
    )
    ap.add_argument(
        "--tiles-frames",
        type=int,
        help="frames per class and split (default all; for small runs and tests)",
    )
    ap.add_argument(
        "--tiles-glimpses",
        type=int,
        help="cap on the fixed scans' native glimpses (default: the raster to each frame's"
        " tiling, the random scan to 64; for small runs and tests)",
    )
    ap.add_argument("--data", type=Path, help="the magnetic-tile footage (default INSPECTOR_DATA)")


def tiles_config(args: Any, s: dict) -> tuple[list[str], dict]:
    """The models to drive and the settings saved with each evaluation."""
    default = "student" if s["mode"] == "quick" else "student,m0,m1,m2,m3"
    names = [n for n in (args.tiles_models or default).split(",") if n]
    config = {
        "mode": s["mode"],
        "seed": 0,
        "limit": args.tiles_frames,
        # Random glimpses: four step budgets (the raster runs to each frame's tiling).
        "random_max": min(64, args.tiles_glimpses or 64),
        "raster_max": args.tiles_glimpses,
        "manifest": "splits.csv",
    }
    return names, config


def evaluate_tiles(args: Any, s: dict, out: Path) -> int:
    """The ``tiles`` section: drive the run's models (:func:`evaluate_models`).

    :returns: 0, or 1 when the footage or the run is missing (said on stderr).
    """
    import sys

    from benchmarks import harness
    from benchmarks.studies.search_controls import training

    root = args.data or harness.magnetic_tile_root()
    run = args.tiles_run or harness.ROOT / DEFAULT_RUN
    if root is None or not (Path(root) / "splits.csv").is_file():
        print("tiles: magnetic-tile footage not found (INSPECTOR_DATA, --data)", file=sys.stderr)
        return 1
    if not model_dirs(run):
        print(f"tiles: no trained models in {run} (pass --tiles-run)", file=sys.stderr)
        return 1
    names, config = tiles_config(args, s)
    evaluate_models(run, Path(root), out, names, config, training.save_result)
    return 0
