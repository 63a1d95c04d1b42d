"""Load a trained model without unpickling anything it carries.

A stable-baselines3 ``.zip`` keeps pickled Python objects in its ``data`` member
(spaces, schedules, the policy class); ``PPO.load`` runs them, so a model file
from a colleague or a vendor could run any code it likes the moment it is
loaded. This module never calls ``PPO.load``. It reads a model in the
project's own layout only:

* the zip holds the members SB3 writes (``data``, ``policy.pth``,
  ``policy.optimizer.pth``, ``pytorch_variables.pth``, the version and system
  info), each within a size bound; anything else is refused;
* ``data`` is read as JSON and only its plain values are used (the number of
  steps trained); the pickled entries are never decoded;
* the weights are read with ``torch.load(weights_only=True)``, which refuses
  any object that is not a tensor or a plain container;
* the network is rebuilt from the run's own ``profile.yaml`` and
  ``config.yaml`` (the spaces and architecture training used) and the weights
  must fit it exactly.

Every refusal is a :class:`inspector.errors.ModelError` of one line.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from inspector.errors import InspectorError, ModelError

log = logging.getLogger(__name__)

#: The members of an SB3 model zip; nothing else is accepted.
MEMBERS = frozenset(
    {
        "data",
        "policy.pth",
        "policy.optimizer.pth",
        "pytorch_variables.pth",
        "_stable_baselines3_version",
        "system_info.txt",
    }
)
#: Members a model cannot do without.
REQUIRED = ("data", "policy.pth")
#: The largest member read (bytes, uncompressed).
MAX_MEMBER_BYTES = 1024 * 1024 * 1024
#: The largest ``data`` member (JSON) read.
MAX_DATA_BYTES = 64 * 1024 * 1024
#: Plain ``data`` fields restored on the rebuilt model (ints).
PLAIN_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num")


@dataclass
class SavedModel:
    """What a model zip holds, read without unpickling.

    :param path: the zip file.
    :param data: the plain (JSON) fields of ``data``; pickled entries are left out.
    :param policy: the policy's state dict (tensors).
    :param optimizer: the optimiser's state dict, when the zip has one.
    """

    path: Path
    data: dict[str, Any]
    policy: dict[str, Any]
    optimizer: dict[str, Any] | None


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, path: Path) -> bytes:
    if info.file_size > limit:
        raise ModelError(
            f"{path}: member {info.filename} is {info.file_size:,} bytes, over {limit:,}"
        )
    with zf.open(info) as f:
        raw = f.read(limit + 1)
    if len(raw) > limit:  # the header lied about the size
        raise ModelError(f"{path}: member {info.filename} is over {limit:,} bytes")
    return raw


def _weights(raw: bytes, what: str, path: Path) -> Any:
    import torch

    try:
        return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError for a forbidden global, others for junk
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ModelError(
            f"{path}: {what} is not plain weights (refused to unpickle it: {first})"
        ) from None


def _plain(value: Any) -> bool:
    """Whether a ``data`` value is plain JSON (not an SB3 pickled entry)."""
    return not (isinstance(value, dict) and ":serialized:" in value)


def read_model_zip(path: str | Path) -> SavedModel:
    """Read an SB3 model zip without unpickling.

    :param path: the ``.zip`` file.
    :raises ModelError: not a zip, members that are not SB3's, oversized members,
        ``data`` that is not JSON, or weights that are not plain tensors.
    """
    import torch

    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ModelError(f"cannot load model {path}: not a model zip ({exc})") from None
    with zf:
        infos = {i.filename: i for i in zf.infolist()}
        odd = sorted(set(infos) - MEMBERS)
        if odd:
            raise ModelError(
                f"{path}: not a model in this project's layout (unexpected member "
                f"{odd[0][:80]!r}; expected {', '.join(sorted(MEMBERS))})"
            )
        missing = [m for m in REQUIRED if m not in infos]
        if missing:
            raise ModelError(f"{path}: not a model zip (no {missing[0]} member)")
        try:
            raw = _member(zf, infos["data"], MAX_DATA_BYTES, path)
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ModelError(f"{path}: its data member is not JSON ({str(exc)[:120]})") from None
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ModelError(f"cannot load model {path}: damaged zip ({exc})") from None
        if not isinstance(doc, dict):
            raise ModelError(f"{path}: its data member is not a JSON object")
        try:
            policy = _weights(
                _member(zf, infos["policy.pth"], MAX_MEMBER_BYTES, path), "policy.pth", path
            )
            optimizer = None
            if "policy.optimizer.pth" in infos:
                optimizer = _weights(
                    _member(zf, infos["policy.optimizer.pth"], MAX_MEMBER_BYTES, path),
                    "policy.optimizer.pth",
                    path,
                )
            if "pytorch_variables.pth" in infos:
                # Read (and so checked) like the rest; PPO keeps nothing in it.
                _weights(
                    _member(zf, infos["pytorch_variables.pth"], MAX_MEMBER_BYTES, path),
                    "pytorch_variables.pth",
                    path,
                )
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ModelError(f"cannot load model {path}: damaged zip ({exc})") from None
    if not isinstance(policy, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in policy.items()
    ):
        raise ModelError(f"{path}: policy.pth is not a state dict of tensors")
    if optimizer is not None and not isinstance(optimizer, dict):
        raise ModelError(f"{path}: policy.optimizer.pth is not an optimiser state dict")
    data = {k: v for k, v in doc.items() if _plain(v)}
    return SavedModel(path=path, data=data, policy=dict(policy), optimizer=optimizer)


class _SpacesEnv(gym.Env):
    """Just the spaces of the inspection environment (the network is built from them)."""

    def __init__(self, profile: Any) -> None:
        super().__init__()
        from inspector.env import env_spaces

        self.observation_space, self.action_space = env_spaces(profile)

    def reset(self, **kwargs: Any) -> Any:
        raise InspectorError("a loaded model has no environment; give it one to train")

    def step(self, action: Any) -> Any:
        raise InspectorError("a loaded model has no environment; give it one to train")


def run_config(model_path: Path) -> Any:
    """The run's TrainConfig (``config.yaml`` beside the model, else the defaults).

    :param model_path: the model zip.
    """
    from inspector.train.config import TrainConfig

    cfg_path = model_path.parent / "config.yaml"
    if cfg_path.is_file():
        return TrainConfig.load(cfg_path)
    log.warning("%s: no config.yaml beside the model; assuming the default network", model_path)
    return TrainConfig()


def restore(model: Any, saved: SavedModel, *, optimizer: bool = False) -> Any:
    """Put the saved weights (and plain counters) into a freshly built model.

    :param model: a HybridPPO built for the same spaces and network.
    :param saved: what :func:`read_model_zip` read.
    :param optimizer: also restore the optimiser's state (resuming training).
    :raises ModelError: the weights do not fit the network.
    """
    try:
        model.policy.load_state_dict(saved.policy, strict=True)
    except RuntimeError as exc:
        first = " ".join(str(exc).split())[:300]
        raise ModelError(
            f"{saved.path}: its weights do not fit the network of the run's scan settings "
            f"(profile.yaml) and config.yaml ({first})"
        ) from None
    if optimizer and saved.optimizer is not None:
        try:
            model.policy.optimizer.load_state_dict(saved.optimizer)
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise ModelError(f"{saved.path}: optimiser state does not fit ({exc})") from None
    for key in PLAIN_COUNTERS:
        value = saved.data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**62:
            setattr(model, key, value)
    return model


def load_model(path: str | Path, profile: Any, cfg: Any | None = None) -> Any:
    """A HybridPPO with the weights of ``path``, rebuilt from the run's profile and config.

    :param path: the model zip.
    :param profile: the run's profile (its scan settings and classes give the spaces).
    :param cfg: the run's TrainConfig (default: :func:`run_config`).
    :raises ModelError: see :func:`read_model_zip` and :func:`restore`.
    """
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.train.runner import build_model

    path = Path(path)
    saved = read_model_zip(path)
    cfg = cfg if cfg is not None else run_config(path)
    try:
        cfg = cfg.replace(n_envs=1, w_kd=0.0)  # no teacher here: no KL weight to warn about
    except ValueError:
        cfg = cfg.replace(n_envs=1)
    env = DummyVecEnv([lambda: _SpacesEnv(profile)])
    try:
        model = build_model(env, profile, cfg, None, None)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise ModelError(
            f"{path}: the network of the run's scan settings (profile.yaml) and config.yaml "
            f"cannot be built ({' '.join(str(exc).split())[:200]})"
        ) from None
    return restore(model, saved)
