"""The torch backend (development only: stations run exported graphs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from inspector.errors import ModelError
from inspector.policy.base import ModelMeta, Policy
from inspector.policy.ensemble import EPS


class PolicyGraph(nn.Module):
    """The policy as one torch module: observations in; logits, probabilities, value out.

    This is what the ONNX exporter traces. The move logits are the first action
    component; the class probabilities are the softmax of the verdict component.

    :param sb3_policy: an SB3 MultiInputActorCriticPolicy over the inspector observation.
    :param n_moves: size of the first action component.
    """

    def __init__(self, sb3_policy: Any, n_moves: int) -> None:
        super().__init__()
        self.policy = sb3_policy
        self.n_moves = n_moves
        self.eval()

    def forward(
        self, glimpse: torch.Tensor, overview: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        obs = {"glimpse": glimpse, "overview": overview, "state": state}
        policy = self.policy
        features = policy.extract_features(obs)
        if policy.share_features_extractor:
            latent_pi, latent_vf = policy.mlp_extractor(features)
        else:
            pi_f, vf_f = features
            latent_pi = policy.mlp_extractor.forward_actor(pi_f)
            latent_vf = policy.mlp_extractor.forward_critic(vf_f)
        logits = policy.action_net(latent_pi)
        move = logits[:, : self.n_moves]
        probs = torch.softmax(logits[:, self.n_moves :], dim=1)
        return move, probs, policy.value_net(latent_vf)


class EnsembleGraph(nn.Module):
    """A verdict ensemble as one torch module (what ``export --ensemble`` traces).

    The lead (first) graph's move logits and value; the class probabilities are the
    members' normalised geometric mean, as :class:`inspector.policy.ensemble.EnsemblePolicy`
    computes them.

    :param graphs: the members' :class:`PolicyGraph`, lead first.
    """

    def __init__(self, graphs: list[PolicyGraph]) -> None:
        super().__init__()
        self.graphs = nn.ModuleList(graphs)
        self.eval()

    def forward(
        self, glimpse: torch.Tensor, overview: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        outs = [g(glimpse, overview, state) for g in self.graphs]
        logp = torch.stack([torch.log(torch.clamp(o[1], EPS, 1.0)) for o in outs]).mean(0)
        return outs[0][0], torch.softmax(logp, dim=1), outs[0][2]


def meta_for_model(
    model: Any,
    profile: Any,
    model_sha256: str = "",
    ok_bias: float = 0.0,
    max_zoom: int | None = None,
) -> ModelMeta:
    """ModelMeta of a trained model and its profile.

    :param ok_bias: the run's calibrated operating point, ``max_zoom`` its search depth
        (:func:`inspector.policy.operating_point.read_calibrated`).
    """
    from inspector import __version__
    from inspector.scan import action_names, scan_metadata, state_size

    s = profile.scan
    return ModelMeta(
        classes=tuple(profile.classes),
        actions=action_names(s),
        scan=scan_metadata(s),
        state_size=state_size(s),
        outcome_matrix=profile.outcome_matrix(),
        profile_name=profile.name,
        profile_sha256=profile.sha256,
        model_sha256=model_sha256,
        step_budget=profile.step_budget,
        exporter_version=__version__,
        ok_bias=float(ok_bias),
        max_zoom=max_zoom,
        classification_only=getattr(profile, "ok_class", "") is None,
    )


class TorchPolicy(Policy):
    """Runs an SB3 model in torch eager mode.

    :param model: a loaded HybridPPO/PPO model.
    :param meta: its metadata.
    """

    backend = "torch"

    def __init__(self, model: Any, meta: ModelMeta) -> None:
        super().__init__(meta)
        self.model = model
        self.graph = PolicyGraph(model.policy, len(meta.actions))

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with torch.no_grad():
            t = [
                torch.as_tensor(np.asarray(obs[k], dtype=np.float32))
                for k in ("glimpse", "overview", "state")
            ]
            a, p, v = self.graph(*t)
        return a.numpy(), p.numpy(), v.numpy()


def load_trained(path: str | Path) -> tuple[Any, Any, str]:
    """Load a training run's model: (model, profile, sha256 of the model file).

    ``path`` is the model ``.zip`` or the run directory holding ``model.zip``,
    ``profile.yaml`` and ``config.yaml``. Nothing in the zip is unpickled
    (:mod:`inspector.train.safe_load`): the network is rebuilt from the run's
    profile and config and takes the zip's weights, read as plain tensors.
    """
    from inspector.files import sha256_file
    from inspector.profile import load_profile
    from inspector.train.safe_load import load_model

    p = Path(path)
    if p.is_dir():
        p = p / "model.zip"
    if not p.is_file():
        raise ModelError(f"model not found: {p}")
    prof_path = p.parent / "profile.yaml"
    if not prof_path.is_file():
        raise ModelError(f"{p}: no profile.yaml beside the model (train writes one)")
    profile = load_profile(str(prof_path))
    model = load_model(p, profile)
    return model, profile, sha256_file(p)


def load_any_policy(path: str | Path, *, threads: int | None = None) -> Policy:
    """:func:`inspector.policy.load.load_policy`, and also a trained ``.zip``, a run
    directory or the ensemble directory of ``train --members`` (``RUN/ensemble``: its
    members in torch at the ensemble's operating point).

    For development and evaluation (``eval``, ``calibrate``, retraining, explain);
    stations call ``load_policy``, which refuses what would unpickle.

    :param threads: ONNX Runtime's intra-op threads (None: :func:`inspector.threads.current`).
    """
    from inspector.policy.load import REFUSED, load_policy
    from inspector.policy.operating_point import read_calibrated
    from inspector.train.distill import ensemble_policy, is_ensemble_dir

    p = Path(path)
    if is_ensemble_dir(p):  # train --members' ensemble: its members in torch, its own point
        return ensemble_policy(p)
    _refuse_members_run(p)
    if p.is_dir() or p.suffix.lower() in REFUSED:
        model, profile, sha = load_trained(p)
        return TorchPolicy(model, meta_for_model(model, profile, sha, **read_calibrated(p, sha)))
    return load_policy(p, threads=threads)


def _refuse_members_run(p: Path) -> None:
    """The top directory of ``train --members`` holds two models: say which to give."""
    from inspector.train.students import members_run_refusal

    refusal = members_run_refusal(p, "give")
    if refusal:
        raise ModelError(refusal)
