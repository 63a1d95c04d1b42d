"""Perception pretraining: teach the glimpse CNN what a defect looks like before RL.

Cloning the teacher gives the verdict head few views of a small defect: a point is
in sight for one or two steps of a part's search, so 16,384 cloned steps hold about
900 of them, and the head learns to answer ``ok`` (measured on the synthetic panels:
point recall 0.00 after cloning, even with the full-resolution glimpse CNN that
reaches 0.99 when trained supervised on native glimpses). The frames' defect masks
give that supervision directly: native glimpse-sized crops, each defect class around
a random pixel of its mask, ``ok`` where the crop holds no mask pixel (ok parts and
the clean areas of defective ones). The glimpse CNN is trained on them with a
throw-away linear head and class-balanced cross-entropy; behaviour cloning and PPO
then start from its weights. With ``TrainConfig.glimpse_evidence`` the head is not
thrown away: it is the extractor's per-glimpse evidence head, whose class probabilities
(max over the remembered glimpses) the verdict head reads. With
``TrainConfig.perception_freeze`` they keep them: :func:`freeze_glimpse_cnn` takes the
glimpse CNN (and the evidence head) out of every later update, so PPO cannot wear the
pretrained detector down. That alone does not keep the point recall
(measured on the synthetic panels, seed 0: 0.67 after pretraining and cloning, 0 after
PPO with the CNN frozen, because PPO shortens the search; see docs/benchmarks.md).

Only frames whose truth has a mask or boxes give defect crops; the crops are taken
from the environment's own camera through the scanner (:meth:`Scanner.look_at
<inspector.scan.Scanner.look_at>`), so they are exactly the glimpses the policy will
see. ``TrainConfig.perception_levels: all`` draws them from every zoom level instead of
the native one alone: on the magnetic tiles an uneven band or a frayed region shows
best from afar, and with ``overview_evidence`` the head then judges the whole frame on
every step (measured there, seed 0: balanced accuracy 0.57 with native crops, 0.80 with
both; see docs/benchmarks.md for the other seeds and the ablation).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from torch import nn

from inspector.scan import to_gray
from inspector.train.config import PERCEPTION_LEVELS
from inspector.train.losses import balanced_class_weights, verdict_cross_entropy

log = logging.getLogger(__name__)


def glimpse_samples(
    make_env: Callable[[], Any], n: int, seed: int = 0, levels: str = "native"
) -> dict[str, np.ndarray]:
    """``n`` glimpse crops with their class: defect crops and clean ``ok`` crops.

    Every part with a defect mask gives one crop around a random mask pixel (at a random
    offset inside the crop) labelled with its class, and one crop that holds no mask
    pixel labelled ok (when one is found in 20 tries); an ok part gives one random crop.

    With ``levels="all"`` each part first draws a zoom level, and its crops are the
    glimpses the scanner takes at that level (the crop resampled to the glimpse size,
    the whole frame at level 0). A defect crop below native resolution is kept only when
    the defect shows in it by the scripted teacher's rule
    (:func:`~inspector.teacher.defect_visible`: local contrast or a few whole
    glimpse pixels of cover); otherwise it is ambiguous and dropped. Large defects (an
    uneven band, a frayed region) are then learnt where they show best, at low zoom,
    and a per-glimpse detector can judge every glimpse of a search, not only the native
    ones.

    :param make_env: builds an :class:`~inspector.env.InspectionEnv` (its camera, profile
        and class indices are used; its rewards are not).
    :param n: number of crops (each one counts as one glimpse, i.e. one env step).
    :param levels: ``native`` (the deepest zoom level only) or ``all``.
    :returns: ``glimpse`` uint8 [n, G, G], ``label`` int64 [n], ``level`` int64 [n].
    """
    from inspector.scan import Scanner

    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if levels not in PERCEPTION_LEVELS:
        raise ValueError(f"levels must be one of {', '.join(PERCEPTION_LEVELS)}, got {levels!r}")
    env = make_env()
    try:
        g = int(env.profile.scan.glimpse)
        ok = _ok_index(env)
        sc = Scanner(env.profile.scan, env.profile.step_budget)
        native = sc.levels - 1
        choices = [native] if levels == "native" else list(range(sc.levels))
        rng = np.random.default_rng(seed)
        xs: list[np.ndarray] = []
        ys: list[int] = []
        ls: list[int] = []
        parts = 0
        while len(xs) < n:
            if not xs and parts >= 1000:  # e.g. no ok class and no masks or boxes
                raise ValueError("perception pretraining found no crops in 1000 parts")
            _, info = env.reset(seed=seed * 1_000_003 + parts)
            parts += 1
            frame = env.frame
            label = int(info["label"])
            if label < 0:
                continue
            img = to_gray(frame.image)
            h, w = img.shape[:2]
            if h < g or w < g:
                raise ValueError(f"frame {frame.part_id} is {w}x{h}, smaller than the glimpse {g}")
            mask = frame.truth.defect_mask(frame.shape) if frame.truth is not None else None
            sc.reset(img)
            # One level per part; no draw with one choice (native crops stay as they were).
            lvl = choices[0] if len(choices) == 1 else choices[int(rng.integers(len(choices)))]
            for crop, crop_label in _part_crops(sc, lvl, native, mask, label, ok, rng):
                xs.append(crop)
                ys.append(crop_label)
                ls.append(lvl)
    finally:
        env.close()
    return {
        "glimpse": np.stack(xs[:n]),
        "label": np.asarray(ys[:n], dtype=np.int64),
        "level": np.asarray(ls[:n], dtype=np.int64),
    }


def _ok_index(env: Any) -> int:
    """The ok class's index, or -1 without one (classification only: no defect-free
    crops are shown, there is no class to call them)."""
    ok = env.profile.ok_class
    return int(env.class_index[ok]) if ok is not None else -1


def _part_crops(
    sc: Any,
    lvl: int,
    native: int,
    mask: np.ndarray | None,
    label: int,
    ok: int,
    rng: np.random.Generator,
) -> list[tuple[np.ndarray, int]]:
    """The (crop, label) pairs one part gives at zoom ``lvl`` (``sc`` holds its frame).

    A defect part: a crop around a random mask pixel when the defect shows in it, then a
    crop clear of the mask (20 tries); an ok part: one random crop. A defect part without
    a mask gives none (nothing says where to crop). Without an ok class (``ok`` -1) no
    crop clear of the defect is given: there is no class to call it.
    """
    from inspector.teacher import defect_visible

    h, w = sc.image.shape[:2]
    cw, ch = sc.crop_size(lvl)
    out: list[tuple[np.ndarray, int]] = []
    if label != ok:
        if mask is None or not mask.any():
            return out
        ys_px, xs_px = np.nonzero(mask)
        k = int(rng.integers(len(ys_px)))
        x0 = int(np.clip(xs_px[k] - rng.integers(0, cw), 0, w - cw))
        y0 = int(np.clip(ys_px[k] - rng.integers(0, ch), 0, h - ch))
        crop = _look_at(sc, lvl, x0, y0)
        rx0, ry0, rx1, ry1 = sc.rect
        if defect_visible(crop, mask[ry0:ry1, rx0:rx1], lvl == native):
            out.append((crop, label))
    for _ in range(20 if label != ok else 1) if ok >= 0 else ():
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        if mask is None or not mask[y0 : y0 + ch, x0 : x0 + cw].any():
            out.append((_look_at(sc, lvl, x0, y0), ok))
            break
    return out


def _look_at(sc: Any, level: int, x0: int, y0: int) -> np.ndarray:
    """The scanner's glimpse of the ``level`` viewport whose top-left corner is (x0, y0)."""
    h, w = sc.image.shape[:2]
    cw, ch = sc.crop_size(level)
    return sc.look_at(level, (x0 + cw / 2) / w, (y0 + ch / 2) / h)


def _extractor(model: Any) -> nn.Module:
    """The policy's features extractor (the actor's, when actor and critic have their own)."""
    return getattr(model.policy, "pi_features_extractor", None) or model.policy.features_extractor


def glimpse_encoder(model: Any) -> nn.Module:
    """The policy's glimpse CNN (:class:`~inspector.train.network.InspectorExtractor`)."""
    ext = _extractor(model)
    cnn = getattr(ext, "glimpse_cnn", None)
    if cnn is None:
        raise TypeError(f"{type(ext).__name__} has no glimpse CNN to pretrain")
    return cnn


def evidence_head(model: Any) -> nn.Linear | None:
    """The extractor's per-glimpse evidence head (``TrainConfig.glimpse_evidence``), or None."""
    return getattr(_extractor(model), "evidence", None)


def freeze_glimpse_cnn(model: Any, frozen: bool = True) -> int:
    """Exclude (or, with ``frozen=False``, re-include) the glimpse CNN from training.

    The evidence head, when the extractor has one, goes with it: it is the CNN's
    pretrained classifier.

    Its parameters get ``requires_grad = frozen is False``: no gradient reaches them, so
    neither behaviour cloning's nor PPO's optimiser moves them (Adam skips parameters
    without a gradient). The flag is not saved with a model; the runner sets it again on
    ``--resume`` from the config.

    :returns: the number of weights frozen (or unfrozen).
    """
    params = list(glimpse_encoder(model).parameters())
    head = evidence_head(model)
    if head is not None:
        params += list(head.parameters())
    for p in params:
        p.requires_grad_(not frozen)
    n = sum(p.numel() for p in params)
    log.info("glimpse CNN %s (%d weights)", "frozen" if frozen else "trainable", n)
    return n


def pretrain_glimpse_cnn(
    cnn: nn.Module,
    data: dict[str, np.ndarray],
    n_classes: int,
    epochs: int = 12,
    lr: float = 2e-3,
    batch: int = 128,
    held_out: float = 0.1,
    seed: int = 0,
    head: nn.Linear | None = None,
    flip: bool = False,
) -> dict[str, float]:
    """Train ``cnn`` (in place) on the crops with a linear head; class-balanced loss.

    :param head: the linear head to train with it (kept, e.g. the extractor's evidence
        head); None: a throw-away one.
    :param flip: flip each batch left-right and/or upside-down at random (seeded): the
        whole-frame crops of ``levels="all"`` repeat the same few hundred defect frames.

    :returns: ``perception/accuracy`` and ``perception/recall_<class index>`` on the
        held-out share (the last ``held_out`` of a seeded permutation), the held-out
        accuracy per zoom level (``perception/accuracy_level<l>``) when ``data`` has a
        ``level`` array with more than one level, and the loss.
    """
    if not 0.0 <= held_out < 1.0:
        raise ValueError(f"held_out must be in [0, 1), got {held_out}")
    gen = th.Generator().manual_seed(seed)
    x = th.as_tensor(data["glimpse"]).float().unsqueeze(1)
    y = th.as_tensor(data["label"]).long()
    perm = th.randperm(len(y), generator=gen)
    n_test = int(round(held_out * len(y)))
    train, test = perm[: len(y) - n_test], perm[len(y) - n_test :]
    if head is None:
        head = nn.Linear(cnn.out_dim, n_classes)
    elif (head.in_features, head.out_features) != (cnn.out_dim, n_classes):
        raise ValueError(
            f"head maps {head.in_features} -> {head.out_features}, need"
            f" {cnn.out_dim} -> {n_classes}"
        )
    weights = balanced_class_weights(y[train].numpy(), n_classes)
    losses = _fit(
        cnn, head, x, y, train, weights, gen, epochs=epochs, lr=lr, batch=batch, flip=flip
    )
    stats: dict[str, float] = {"perception/loss": float(np.mean(losses)) if losses else 0.0}
    if n_test:
        levels = th.as_tensor(data["level"])[test] if "level" in data else None
        stats.update(_held_out_stats(cnn, head, x[test], y[test], levels, n_classes))
    log.info("perception pretraining: %s", stats)
    return stats


def _fit(
    cnn: nn.Module,
    head: nn.Linear,
    x: th.Tensor,
    y: th.Tensor,
    train: th.Tensor,
    weights: Any,
    gen: th.Generator,
    *,
    epochs: int,
    lr: float,
    batch: int,
    flip: bool,
) -> list[float]:
    """Train ``cnn`` and ``head`` on the ``train`` rows; the last epoch's batch losses.

    Both are left in the training mode they came in.
    """
    from inspector.train.network import standardise

    opt = th.optim.Adam([*cnn.parameters(), *head.parameters()], lr=lr)
    was_training = cnn.training, head.training
    cnn.train()
    head.train()
    losses: list[float] = []
    for _ in range(epochs):
        order = train[th.randperm(len(train), generator=gen)]
        losses = []
        for s in range(0, len(order), batch):
            b = order[s : s + batch]
            xb = x[b]
            if flip:
                k = int(th.randint(4, (1,), generator=gen))
                xb = xb.flip(-1) if k & 1 else xb
                xb = xb.flip(-2) if k & 2 else xb
            loss = verdict_cross_entropy(head(cnn(standardise(xb))), y[b], weights)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    cnn.train(was_training[0])
    head.train(was_training[1])
    return losses


def _held_out_stats(
    cnn: nn.Module,
    head: nn.Linear,
    x: th.Tensor,
    y: th.Tensor,
    levels: th.Tensor | None,
    n_classes: int,
) -> dict[str, float]:
    """Accuracy, recall per class and (with more than one zoom level) accuracy per level."""
    from inspector.train.network import standardise

    with th.no_grad():
        pred = head(cnn(standardise(x))).argmax(1)
    stats = {"perception/accuracy": float((pred == y).float().mean())}
    for c in range(n_classes):
        sel = y == c
        if bool(sel.any()):
            stats[f"perception/recall_{c}"] = float((pred[sel] == c).float().mean())
    seen = th.unique(levels).tolist() if levels is not None else []
    if len(seen) > 1:
        for lvl in seen:
            sel = levels == lvl
            stats[f"perception/accuracy_level{lvl}"] = float((pred[sel] == y[sel]).float().mean())
    return stats


def perception_pretrain(
    model: Any,
    make_env: Callable[[], Any],
    n: int,
    epochs: int = 12,
    seed: int = 0,
    levels: str = "native",
) -> dict[str, float]:
    """Collect ``n`` crops with :func:`glimpse_samples` and pretrain the model's glimpse CNN.

    The model's evidence head, when it has one, is the head trained with it. Crops from
    every zoom level (``levels="all"``) are flipped at random while training.
    """
    data = glimpse_samples(make_env, n, seed=seed, levels=levels)
    n_classes = int(model.policy.action_space.nvec[-1])
    stats = pretrain_glimpse_cnn(
        glimpse_encoder(model),
        data,
        n_classes,
        epochs=epochs,
        seed=seed,
        head=evidence_head(model),
        flip=levels != "native",
    )
    stats["perception/samples"] = float(len(data["label"]))
    return stats
