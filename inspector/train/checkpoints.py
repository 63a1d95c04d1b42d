"""Checkpoints of a training run: write one atomically, read ``latest.json`` with
bounds, and rebuild the model from it for ``--resume``."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import InspectorError
from inspector.files import atomic_path, write_atomic

log = logging.getLogger(__name__)


def save_checkpoint(model: Any, out: Path) -> Path:
    """Write checkpoints/ckpt_<steps>.zip atomically and point latest.json at it."""
    ck = out / "checkpoints"
    ck.mkdir(parents=True, exist_ok=True)
    path = ck / f"ckpt_{model.num_timesteps:09d}.zip"
    with atomic_path(path) as tmp:
        model.save(str(tmp))
    norm = getattr(model.rollout_buffer, "normaliser", None)
    state = {"path": path.name, "num_timesteps": int(model.num_timesteps)}
    if norm is not None:
        state["normaliser"] = {
            "mean": norm.ret_rms.mean,
            "var": norm.ret_rms.var,
            "count": norm.ret_rms.count,
            "lo": norm.lo if np.isfinite(norm.lo) else None,
            "hi": norm.hi if np.isfinite(norm.hi) else None,
        }
    write_atomic(ck / "latest.json", json.dumps(state))
    return path


#: The largest ``latest.json`` read (bytes).
MAX_LATEST_BYTES = 64 * 1024


def _finite_or_none(value: Any, key: str, where: Path) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InspectorError(
            f"{where}: normaliser.{key} must be a finite number, got {value!r:.40}"
        )
    return float(value)


def read_latest(out: Path) -> tuple[dict[str, Any], Path]:
    """``checkpoints/latest.json`` of a run, checked: (state, checkpoint path).

    The checkpoint it names must be a ``ckpt_*.zip`` file inside the run's
    ``checkpoints/`` folder (no path separators, no symlink out); the normaliser's
    numbers must be finite.

    :param out: the run directory.
    :raises InspectorError: a damaged or hostile ``latest.json``.
    """
    ck = out / "checkpoints"
    latest = ck / "latest.json"
    try:
        raw = latest.read_bytes()[: MAX_LATEST_BYTES + 1]
        if len(raw) > MAX_LATEST_BYTES:
            raise ValueError(f"over {MAX_LATEST_BYTES} bytes")
        state = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InspectorError(f"{latest}: cannot read it ({str(exc)[:120]})") from None
    if not isinstance(state, dict):
        raise InspectorError(f"{latest}: expected a JSON object")
    name = state.get("path")
    if (
        not isinstance(name, str)
        or not name.startswith("ckpt_")
        or not name.endswith(".zip")
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or any(ord(c) < 32 for c in name)
    ):
        raise InspectorError(
            f"{latest}: 'path' must name a ckpt_*.zip file in {ck}, got {name!r:.80}"
        )
    ckpt = ck / name
    real_ck = os.path.realpath(ck)
    if os.path.commonpath([real_ck, os.path.realpath(ckpt)]) != real_ck or not ckpt.is_file():
        raise InspectorError(f"{latest}: checkpoint {name!r} is not a file inside {ck}")
    norm = state.get("normaliser")
    if norm is not None:
        if not isinstance(norm, dict):
            raise InspectorError(f"{latest}: 'normaliser' must be an object")
        clean = {k: _finite_or_none(norm.get(k), k, latest) for k in ("mean", "var", "count")}
        if None in clean.values() or clean["var"] < 0 or clean["count"] < 0:
            raise InspectorError(f"{latest}: normaliser needs finite mean, var >= 0, count >= 0")
        clean.update({k: _finite_or_none(norm.get(k), k, latest) for k in ("lo", "hi")})
        state["normaliser"] = clean
    return state, ckpt


def resume_model(out: Path, env: Any, profile: Any, cfg: Any, teacher: Any) -> Any:
    """The run's model at its last checkpoint, optimiser and return normaliser included.

    :param out: the run directory; ``env``, ``profile``, ``cfg``, ``teacher`` as for
        :func:`inspector.train.build.build_model`.
    :raises InspectorError: a damaged ``latest.json`` (see :func:`read_latest`).
    """
    from inspector.train.build import build_model
    from inspector.train.perception import freeze_glimpse_cnn
    from inspector.train.safe_load import read_model_zip, restore

    state, ckpt = read_latest(out)
    model = build_model(env, profile, cfg, teacher, str(out / "tb"))
    restore(model, read_model_zip(ckpt), optimizer=True)
    if teacher is None:
        model.w_kd = 0.0
    # The run's config decides (a checkpoint from before the option has none).
    model.verdict_on_stop = cfg.verdict_on_stop
    norm = state.get("normaliser")
    if norm:
        nm = model.rollout_buffer.normaliser
        nm.ret_rms.mean, nm.ret_rms.var, nm.ret_rms.count = (
            norm["mean"],
            norm["var"],
            norm["count"],
        )
        nm.lo = norm["lo"] if norm["lo"] is not None else np.inf
        nm.hi = norm["hi"] if norm["hi"] is not None else -np.inf
    log.warning("resuming from %s at step %d", ckpt.name, model.num_timesteps)
    if cfg.perception_freeze:
        freeze_glimpse_cnn(model)
    return model
