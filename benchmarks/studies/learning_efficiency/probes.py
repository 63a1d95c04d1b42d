"""What the task allows without learning: the search ceiling, verdict payoffs, point
visibility; and the supervised perception probe.
"""

from __future__ import annotations

import numpy as np

from benchmarks.studies.learning_efficiency.arms import arm_setup
from benchmarks.studies.learning_efficiency.tasks import GRID_PITCHES, current


def search_ceiling(parts: int, seed: int = 0) -> dict:
    """Accuracy of the non-privileged searching teacher with a perfect verdict once in sight.

    It searches the native grid and declares the true class as soon as the defect is in
    sight, ``ok`` when the budget ends first: what a policy that searches like it and
    never misjudges a glimpse would reach. No learning involved; it says whether the
    task's target is reachable at all within the step budget.
    """
    from inspector.env import InspectionEnv
    from inspector.teacher import ScriptedTeacher

    prof, _, _ = arm_setup("b")
    camera = {**current().camera, "seed": 10_000 + seed}
    env = InspectionEnv(prof, "synthetic", camera, teacher=ScriptedTeacher(fallback=False))
    hits: dict[str, list[bool]] = {c: [] for c in env.classes}
    steps = []
    for ep in range(parts):
        _, info = env.reset(seed=ep)
        label, a, v = info["label"], info["teacher"], info["teacher_verdict"]
        while True:
            _, _, term, trunc, info = env.step([a, v])
            if term or trunc:
                break
            a, v = info["teacher_next"], info["teacher_verdict_next"]
        hits[env.classes[label]].append(bool(info["correct"]))
        steps.append(info["steps"])
    recall = {c: float(np.mean(h)) if h else None for c, h in hits.items()}
    return {
        "accuracy": float(np.mean([h for hs in hits.values() for h in hs])),
        "per_class_recall": recall,
        "mean_steps": float(np.mean(steps)),
    }


def verdict_payoffs(arm: str, parts: int = 300, seed: int = 0) -> dict:
    """What each verdict earns when declared at the first step, per true class (no learning).

    The same parts are replayed once per verdict; rewards are the environment's (before
    redistribution and normalisation). From the matrix follow the payoff of any policy
    that decides from the overview alone: a constant verdict, or line vs the rest.

    :returns: ``classes``, ``prior`` (share of each class among the parts) and ``matrix``
        [true class][verdict] of mean rewards.
    """
    from inspector.env import InspectionEnv
    from inspector.scan import STOP

    prof, _, _ = arm_setup(arm)
    env = InspectionEnv(prof, "synthetic", {**current().camera, "seed": 30_000 + seed})
    k = len(env.classes)
    total, count = np.zeros((k, k)), np.zeros(k)
    for ep in range(parts):
        for v in range(k):
            _, info = env.reset(seed=ep)
            _, r, _, _, _ = env.step([STOP, v])
            total[info["label"], v] += r
        count[info["label"]] += 1
    return {
        "classes": list(env.classes),
        "prior": (count / count.sum()).tolist(),
        "matrix": (total / np.maximum(count, 1)[:, None]).tolist(),
    }


def payoff_note(payoffs: dict[str, dict]) -> str:
    """One note: the expected reward per part of overview-only policies under each profile."""
    parts = []
    for arm, p in payoffs.items():
        m, prior, cls = np.asarray(p["matrix"]), np.asarray(p["prior"]), p["classes"]
        const = prior @ m  # expected reward of each constant verdict
        li = cls.index("line")
        # Line told from the rest on the overview, the rest called whichever pays more.
        rest = [i for i in range(len(cls)) if i != li]
        line_rest = prior[li] * m[li, li] + max(sum(prior[i] * m[i, v] for i in rest) for v in rest)
        best = int(np.argmax(const))
        parts.append(
            f"({arm}) constant "
            + " / ".join(f"{c} {const[i]:+.2f}" for i, c in enumerate(cls))
            + f" (best: {cls[best]}), line vs the rest {line_rest:+.2f}, every part right"
            f" {float(prior @ np.diag(m)):+.2f}"
        )
    return (
        "Verdict payoffs (`verdict_payoffs`: each verdict declared at the first step on the"
        " same 300 parts, the environment's rewards before redistribution and normalisation;"
        " what a policy that decides from the overview alone can earn): " + "; ".join(parts) + "."
    )


def grid_residual(gray: np.ndarray) -> np.ndarray:
    """``|pixel - median of the four pixels one grid pitch away|``, at the frame's pitch.

    The synthetic panels have a periodic pixel grid (pitch 3, 4 or 5); the pitch is
    taken as the one that predicts the frame best, so nothing privileged is used.
    """

    g = gray.astype(np.float32)
    best: tuple[float, np.ndarray] | None = None
    for p in GRID_PITCHES:
        pred = np.stack([np.roll(g, p, 1), np.roll(g, -p, 1), np.roll(g, p, 0), np.roll(g, -p, 0)])
        r = np.abs(g - np.median(pred, axis=0))
        if best is None or float(r.mean()) < best[0]:
            best = (float(r.mean()), r)
    assert best is not None
    return best[1]


def point_visibility(frames: int = 600, seed: int = 0, false_alarm: float = 0.05) -> dict:
    """How visible a point is at native resolution, with no learning: two fixed detectors.

    Each scores a native glimpse (the task's glimpse size) by its largest residual: ``|pixel -
    median3x3(pixel)|`` (local), or the residual against the pixels one grid pitch away
    (:func:`grid_residual`, which knows the panel has a periodic grid). Glimpses around
    a point are compared with glimpses of ok panels, thresholded at ``false_alarm`` of
    the ok ones. The search ceiling assumes a perfect verdict once a point is in sight;
    this says what a simple detector gets.
    """
    import cv2

    from inspector.camera import open_camera

    cam = open_camera("synthetic", {**current().camera, "seed": 10_000 + seed})
    scores: dict[str, dict[str, list[float]]] = {
        k: {"ok": [], "point": []} for k in ("local", "grid")
    }
    for i in range(frames):
        f = cam.load(i)
        if f.truth is None or f.truth.label not in ("ok", "point"):
            continue
        gray = f.gray
        res = {
            "local": np.abs(gray.astype(np.int16) - cv2.medianBlur(gray, 3).astype(np.int16)),
            "grid": grid_residual(gray),
        }
        s, g, h = gray.shape[0], current().glimpse, current().glimpse // 2
        if f.truth.label == "point":
            corners = [
                (min(max(8, b.y0 - h), s - g - 8), min(max(8, b.x0 - h), s - g - 8))
                for b in f.truth.boxes
            ]
        else:
            corners = [(s // 2 - h, s // 2 - h)]
        for k, r in res.items():
            for y0, x0 in corners:
                scores[k][f.truth.label].append(float(r[y0 : y0 + g, x0 : x0 + g].max()))
    out: dict = {"false_alarm": false_alarm, "points": len(scores["local"]["point"])}
    for k, sc in scores.items():
        thr = float(np.percentile(sc["ok"], 100 * (1 - false_alarm)))
        out[k] = {
            "ok_max_median": float(np.median(sc["ok"])),
            "point_max_median": float(np.median(sc["point"])),
            "recall": float(np.mean(np.asarray(sc["point"]) > thr)),
        }
    return out


def perception_probe(
    samples: int = 12_000, epochs: int = 12, seed: int = 0, variants: tuple = ("fast", "fine")
) -> dict:
    """Held-out accuracy of the glimpse CNN, trained supervised, on point-vs-ok glimpses.

    Native crops (the task's glimpse size) of the training panels: one around each
    point (at a random offset) and two at random places of each ok panel; 80 % train,
    20 % held out. Both :class:`~inspector.train.network.GlimpseCNN` variants, a linear
    head, Adam 2e-3.
    It separates "can the network see a point at all" from "does RL teach it to".
    """
    import torch
    from torch import nn

    from inspector.camera import open_camera
    from inspector.train.network import GlimpseCNN, standardise

    torch.manual_seed(seed)
    cam = open_camera("synthetic", {**current().camera, "seed": seed})
    rng = np.random.default_rng(seed)
    xs, ys, i = [], [], 0
    size, g = current().camera["size"], current().glimpse
    while len(xs) < samples:
        f = cam.load(i)
        i += 1
        img = f.gray
        if f.truth is None:
            continue
        if f.truth.label == "point":
            for b in f.truth.boxes:
                x0 = int(np.clip(b.x0 - rng.integers(0, g), 0, size - g))
                y0 = int(np.clip(b.y0 - rng.integers(0, g), 0, size - g))
                xs.append(img[y0 : y0 + g, x0 : x0 + g])
                ys.append(1)
        elif f.truth.label == "ok":
            for _ in range(2):
                x0, y0 = (int(v) for v in rng.integers(0, size - g + 1, size=2))
                xs.append(img[y0 : y0 + g, x0 : x0 + g])
                ys.append(0)
    x = torch.tensor(np.stack(xs)).float().unsqueeze(1)
    y = torch.tensor(ys)
    perm = torch.randperm(len(y))
    train, test = perm[: int(0.8 * len(y))], perm[int(0.8 * len(y)) :]
    out = {"samples": len(y)}
    for name in variants:
        fine = name == "fine"
        cnn = GlimpseCNN(8, fine=fine)
        head = nn.Linear(cnn.out_dim, 2)
        opt = torch.optim.Adam([*cnn.parameters(), *head.parameters()], lr=2e-3)
        for _ in range(epochs):
            order = train[torch.randperm(len(train))]
            for s in range(0, len(order), 128):
                b = order[s : s + 128]
                loss = nn.functional.cross_entropy(head(cnn(standardise(x[b]))), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            pred = head(cnn(standardise(x[test]))).argmax(1)
        out[name] = {
            "accuracy": float((pred == y[test]).float().mean()),
            "recall": float((pred[y[test] == 1] == 1).float().mean()),
            "false_alarm": float((pred[y[test] == 0] == 1).float().mean()),
        }
    return out
