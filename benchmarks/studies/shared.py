"""What more than one study uses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: Weight of the scripted teacher's stop steps in the class-balanced verdict
#: cross-entropy (``TrainConfig.verdict_stop_weight``; the stop steps are ~7 % of the
#: cloned samples): ``--balanced-verdict`` of learning_efficiency and
#: ``--agent-balanced-verdict`` of quality_magnetic_tile.
BALANCED_STOP_WEIGHT = 8.0


def learn_with_curve(
    model: Any,
    timesteps: int,
    offset: int,
    eval_every: int,
    evaluate: Callable[[int], dict],
    curve: list[dict],
) -> list[dict]:
    """``model.learn(timesteps)``, evaluating along the way: the learning curve.

    Steps count from ``offset`` (the pretraining's crops and cloned steps, which a
    study counts as env steps). ``evaluate(steps)`` is appended to ``curve`` at the
    first rollout start at or past each ``eval_every`` steps, and once at the end.

    :returns: ``curve``.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    class Eval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = offset + eval_every

        def _on_rollout_start(self) -> None:
            if self.num_timesteps + offset >= self.next:
                self.next += eval_every
                curve.append(evaluate(self.num_timesteps + offset))

        def _on_step(self) -> bool:
            return True

    model.learn(timesteps, callback=Eval())
    curve.append(evaluate(model.num_timesteps + offset))
    return curve


def passes(model: Path, params: dict[str, Any]) -> tuple[Any, dict[str, tuple]]:
    """The model and one full-depth pass over each split: {split: (labels, decisions)}."""
    from inspector.train.evaluate import run_parts
    from inspector.train.torch_policy import load_any_policy

    pol = load_any_policy(model)
    top = int(pol.meta.scan["zoom_levels"]) - 1
    out = {}
    for split in ("val", "test"):
        labels, decisions, _ = run_parts(
            pol, "folder", {**params, "split": split}, None, max_zoom=top
        )
        idx = {c: i for i, c in enumerate(pol.meta.classes)}
        out[split] = (np.asarray([idx[c] for c in labels]), decisions)
    return pol, out


def at_depth(decisions: list, d: int) -> tuple[np.ndarray, float, float]:
    """Probabilities, mean actions and mean native pixel fraction of the episodes cut at
    depth ``d``: an episode cut there looked at no deeper level than ``d`` (below native:
    no native pixel); one never cut is the full episode."""
    from inspector.policy.agent import capped_at

    cut = [capped_at(x, d) for x in decisions]
    pix = [0.0 if any(lv > d for _, lv, _ in x.deeper) else x.pixel_fraction for x in decisions]
    return np.stack([c[0] for c in cut]), float(np.mean([c[1] for c in cut])), float(np.mean(pix))


def record_models(
    run: Path,
    label: str,
    models: list[str],
    command: str,
    folder: Path,
    study: str,
    figures_of: Callable[[Any, dict[str, tuple], Path], dict],
    extra: dict | None = None,
) -> list[dict]:
    """One full-depth pass (:func:`passes`) per model of a finished ``train --members``
    run (``student``, ``ensemble``, ``members/m0`` ...), its figures saved.

    The footage comes from the run's first member's parameters (its ``path`` replaced by
    the magnetic tiles' root where it does not exist here).

    :param folder: where each result goes (``LABEL_MODEL.json``).
    :param study: the study's name, saved with each result.
    :param figures_of: ``figures_of(policy, passes, model folder)``: the result's figures.
    :param extra: more config keys of every result (an arm's name ...).
    """
    import json
    import time

    from benchmarks.harness import magnetic_tile_root, save_result

    spec = json.loads((run / "members" / "m0" / "member.json").read_text())
    params = {k: v for k, v in spec["params"].items() if k != "split"}
    if not Path(params.get("path", "")).is_dir() and magnetic_tile_root() is not None:
        params["path"] = str(magnetic_tile_root())
    saved = []
    for name in models:
        t0 = time.time()
        pol, runs = passes(run / name, params)
        config = {"label": label, "run": run.name, "model": name, **(extra or {})}
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        result = {"command": command, "recorded": stamp, **figures_of(pol, runs, run / name)}
        stem = f"{label}_{name.replace('/', '_')}"
        saved.append(save_result(folder / f"{stem}.json", study, config, result))
        print(f"{label} {name}: recorded in {time.time() - t0:.0f} s wall")
    return saved
