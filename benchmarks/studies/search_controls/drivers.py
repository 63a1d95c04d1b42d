"""Drive one trained policy's perception and verdict heads by different scans.

The policy is the product's (:class:`~inspector.policy.base.Policy`): its class
probabilities are read after every glimpse, whoever chose the glimpse. The learned
agent chooses its own (its move head, as the station runs it); the fixed drivers
place native glimpses themselves through :meth:`Scanner.look_at
<inspector.scan.Scanner.look_at>` and count one step each, so the observation the
verdict head reads (glimpses, remembered glimpses, seen map, steps used) is built by
the same scanner code as the agent's:

* ``overview``: no glimpse but the overview (k = 0);
* ``raster``: native glimpses in a fixed order, first the non-overlapping tiling of
  the frame row by row (the first ``n_tiles`` of them are exhaustive tiling), then the
  half-stride positions between tiles;
* ``random``: native glimpses at uniformly random positions, seeded per part;
* ``walk``: a fixed path through the agent's own actions (zoom in to native, to the
  top-left corner, then a serpentine of half-viewport moves): the raster an agent
  with this action set could follow without looking, paying its moves in glimpses.

A fixed scan of k glimpses is the first k of its sequence, so one pass per part gives
every k. The learned agent's capped runs are its own trajectory cut after b actions,
judged then by its verdict head (what :func:`~inspector.policy.agent.run_episode`
does when the budget runs out), so one pass gives every cap too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

FIXED = ("raster", "random", "walk")


def raster_positions(w: int, h: int, cw: int, ch: int) -> list[tuple[float, float]]:
    """Centres (normalised) of the raster: the tiling row by row, then the half-stride
    positions between tiles, row by row (each viewport kept inside the frame)."""
    nx, ny = max(1, math.ceil(w / cw)), max(1, math.ceil(h / ch))

    def centre(x0: float, y0: float) -> tuple[float, float]:
        x0, y0 = min(max(0.0, x0), w - cw), min(max(0.0, y0), h - ch)
        return ((x0 + cw / 2) / w, (y0 + ch / 2) / h)

    tiles = [centre(i * cw, j * ch) for j in range(ny) for i in range(nx)]
    half = [
        centre(i * cw / 2, j * ch / 2)
        for j in range(2 * ny - 1)
        for i in range(2 * nx - 1)
        if i % 2 or j % 2
    ]
    out: list[tuple[float, float]] = []
    seen: set[tuple[float, float]] = set()  # footage frames hold hundreds of positions
    for c in tiles + half:
        key = (round(c[0], 6), round(c[1], 6))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def tile_count(w: int, h: int, cw: int, ch: int) -> int:
    """Native tiles that cover the frame (exhaustive tiling)."""
    return max(1, math.ceil(w / cw)) * max(1, math.ceil(h / ch))


def random_positions(
    rng: np.random.Generator, w: int, h: int, cw: int, ch: int, k: int
) -> list[tuple[float, float]]:
    """``k`` uniformly random viewport centres with the viewport inside the frame."""
    xs = rng.uniform(cw / 2, w - cw / 2, size=k) if w > cw else np.full(k, w / 2)
    ys = rng.uniform(ch / 2, h - ch / 2, size=k) if h > ch else np.full(k, h / 2)
    return [(float(x / w), float(y / h)) for x, y in zip(xs, ys)]


def fixed_scan(policy: Any, scanner: Any, image: np.ndarray, positions) -> dict:
    """The class probabilities after the overview and after each native glimpse.

    :returns: ``probs`` [k+1, C], ``glimpses`` [k+1] (the overview counts as one),
        ``pixel_fraction`` [k+1].
    """
    obs = scanner.reset(image)
    probs = [policy.act(obs)[1]]
    glimpses, pix = [len(scanner.path)], [scanner.pixel_fraction()]
    native = scanner.levels - 1
    for cx, cy in positions:
        scanner.look_at(native, cx, cy)
        scanner.steps += 1  # a glimpse is a step, as it is for the agent
        probs.append(policy.act(scanner.observation())[1])
        glimpses.append(len(scanner.path))
        pix.append(scanner.pixel_fraction())
    return {
        "probs": np.asarray(probs),
        "glimpses": np.asarray(glimpses),
        "pixel_fraction": np.asarray(pix),
    }


def _can_move(scanner: Any, action: str) -> bool:
    """Whether ``action`` would move the viewport (no step wasted against an edge)."""
    x0, y0, x1, y1 = scanner.rect
    h, w = scanner.image.shape[:2]
    return {"left": x0 > 0, "right": x1 < w, "up": y0 > 0, "down": y1 < h}[action]


def walk_scan(policy: Any, scanner: Any, image: np.ndarray, max_actions: int) -> dict:
    """The fixed serpentine walk through the agent's own actions (see the module doc).

    :returns: as :func:`fixed_scan`, one entry per action taken (every action moves).
    """
    obs = scanner.reset(image)
    probs = [policy.act(obs)[1]]
    glimpses, pix = [len(scanner.path)], [scanner.pixel_fraction()]

    def take(name: str) -> bool:
        if len(probs) > max_actions:
            return False
        o, _, _ = scanner.step(scanner.actions.index(name))
        probs.append(policy.act(o)[1])
        glimpses.append(len(scanner.path))
        pix.append(scanner.pixel_fraction())
        return True

    while scanner.level < scanner.levels - 1 and take("zoom_in"):
        pass
    for corner in ("left", "up"):
        while _can_move(scanner, corner) and take(corner):
            pass
    across = "right"
    while len(probs) <= max_actions:
        while _can_move(scanner, across) and take(across):
            pass
        if not (_can_move(scanner, "down") and take("down")):
            break
        across = "left" if across == "right" else "right"
    return {
        "probs": np.asarray(probs),
        "glimpses": np.asarray(glimpses),
        "pixel_fraction": np.asarray(pix),
    }


def agent_scan(policy: Any, scanner: Any, image: np.ndarray, budget: int) -> dict:
    """The learned agent's own episode, with the probabilities at every observation.

    ``probs[t]`` is what the verdict head says at the observation of action ``t``;
    ``stop`` is the index of the stop action (-1: the budget ran out, and the
    decision is ``probs[budget]``, the observation after the last action).
    """
    obs = scanner.reset(image)
    probs, glimpses, pix, stop = [], [], [], -1
    for t in range(budget + 1):
        a, p = policy.act(obs)
        probs.append(p)
        glimpses.append(len(scanner.path))
        pix.append(scanner.pixel_fraction())
        if t == budget:
            break
        if a == scanner.stop:  # the model's own table (stop is its last action)
            stop = t
            break
        obs, _, _ = scanner.step(a)
    return {
        "probs": np.asarray(probs),
        "glimpses": np.asarray(glimpses),
        "pixel_fraction": np.asarray(pix),
        "stop": stop,
    }


def drive(
    policy: Any,
    frames: Iterable[Any],
    seed: int = 0,
    max_fixed: int | None = None,
    fixed: bool = True,
) -> dict:
    """Every driver on every frame: the per-part arrays :mod:`.analysis` scores.

    :param frames: labelled frames (``frame.truth.label`` one of the policy's classes).
    :param seed: seeds the random scan (per part: ``seed``, part index).
    :param max_fixed: most native glimpses of a fixed scan (default: the step budget
        less one, and at most the raster's positions).
    :param fixed: also run the fixed drivers (False: the learned agent alone).
    :returns: ``labels`` [N] class indices, ``tiles`` [N]; per fixed driver ``probs``
        [N, K+1, C], ``glimpses`` and ``pixel_fraction`` [N, K+1]; ``agent``: ``probs``
        [N, B+1, C] (padded with the decision), ``glimpses``, ``pixel_fraction``,
        ``stop`` [N].
    """
    from inspector.scan import Scanner

    meta = policy.meta
    budget = int(meta.step_budget)
    scanner = Scanner.from_metadata(meta, budget)
    idx = {c: i for i, c in enumerate(meta.classes)}
    labels, tiles = [], []
    names = (*FIXED, "agent", "tiling") if fixed else ("agent",)
    if "zoom_in" not in scanner.actions:  # a model without moves has no walk
        names = tuple(d for d in names if d != "walk")
    per: dict[str, dict[str, list]] = {
        d: {"probs": [], "glimpses": [], "pixel_fraction": []} for d in names
    }
    per["agent"]["stop"] = []
    for n, frame in enumerate(frames):
        labels.append(idx[frame.truth.label])
        scanner.reset(frame.image)
        h, w = scanner.image.shape[:2]
        cw, ch = scanner.crop_size(scanner.levels - 1)
        raster = raster_positions(w, h, cw, ch)
        k = min(budget - 1, len(raster)) if max_fixed is None else max_fixed
        tiles.append(tile_count(w, h, cw, ch))
        rng = np.random.default_rng([seed, n])
        plans = {
            "raster": raster[:k],
            "random": random_positions(rng, w, h, cw, ch, k),
            "tiling": raster[: tiles[-1]],
        }
        for d, pos in plans.items() if fixed else ():
            r = fixed_scan(policy, scanner, frame.image, pos)
            for key in ("probs", "glimpses", "pixel_fraction"):
                per[d][key].append(r[key])
        if fixed and "zoom_in" in scanner.actions:  # the walk needs the move actions
            r = walk_scan(policy, scanner, frame.image, budget - 1)
            for key in ("probs", "glimpses", "pixel_fraction"):
                per["walk"][key].append(r[key])
        r = agent_scan(policy, scanner, frame.image, budget)
        for key in ("probs", "glimpses", "pixel_fraction"):
            per["agent"][key].append(r[key])
        per["agent"]["stop"].append(r["stop"])
    out: dict[str, Any] = {"labels": np.asarray(labels), "tiles": np.asarray(tiles)}
    for d, arrays in per.items():
        if d == "tiling":  # as many glimpses as tiles, which may differ from part to part
            out[d] = {
                "last": np.stack([p[-1] for p in arrays["probs"]]),
                "max": np.stack([max_pooled(p)[-1] for p in arrays["probs"]]),
                "glimpses": np.asarray([g[-1] for g in arrays["glimpses"]]),
                "pixel_fraction": np.asarray([f[-1] for f in arrays["pixel_fraction"]]),
            }
            continue
        size = budget + 1 if d == "agent" else None  # every cap, whoever stopped when
        out[d] = {key: _padded(v, size) for key, v in arrays.items() if key != "stop"}
        if "stop" in arrays:
            out[d]["stop"] = np.asarray(arrays["stop"])
    return out


def _padded(rows: list[np.ndarray], n: int | None = None) -> np.ndarray:
    """Stack per-part sequences, each padded to ``n`` (default the longest) with its own
    last entry (a scan that ended keeps its decision)."""
    n = n or max(len(r) for r in rows)
    return np.stack([np.concatenate([r, np.repeat(r[-1:], n - len(r), axis=0)]) for r in rows])


def max_pooled(probs: np.ndarray) -> np.ndarray:
    """[k+1, C] -> for every prefix, the probabilities of the observation with the
    highest defect score ``1 - p(ok)`` so far (a detector's max over its glimpses)."""
    best = np.maximum.accumulate(1.0 - probs[..., 0], axis=-1)
    out = np.empty_like(probs)
    arg = 0
    for t in range(probs.shape[-2]):
        if 1.0 - probs[..., t, 0] >= best[..., t] - 1e-12:
            arg = t
        out[..., t, :] = probs[..., arg, :]
    return out


def synthetic_frames(camera: dict, n: int):
    """``n`` fixed labelled synthetic frames (the evaluation block of ``run_parts``)."""
    from inspector.camera import open_camera
    from inspector.train.evaluate import EVAL_INDEX_BASE

    cam = open_camera("synthetic", camera)
    try:
        for i in range(n):
            yield cam.load(EVAL_INDEX_BASE + i)
    finally:
        cam.close()
