"""Verdict ensembles: several trained agents judge the glimpses one of them takes.

Agents trained with different seeds rank parts differently, and their errors are only
partly shared, so the combined class probabilities separate defective from good parts
better than any one of them (``docs/benchmarks.md``, magnetic tiles). The first member,
the *lead*, chooses every move and when to stop; each member's verdict head reads the
lead's observation (its remembered glimpses, overview and state), and the class
probabilities are their normalised geometric mean (the mean of the log-probabilities,
soft-maxed). The lead alone decides where to look, so an ensemble examines the pixels
its lead does; it costs one forward pass per member and step.

The members must share the verdict classes, actions, scan settings and state size (the
observation each reads) and the outcome values (the verdict rule). An ensemble is
calibrated as a whole: the members' own operating points do not carry over, so it
starts at ok bias 0 and ``inspector calibrate`` chooses its bias.

``inspector export RUN --ensemble RUN2 ...`` writes the ensemble as one ONNX graph
(:class:`inspector.train.torch_policy.EnsembleGraph`) with the lead's metadata and
``inspector.ensemble`` (the members' model sha256, lead first), so the station,
``calibrate`` and the TensorRT engine build run it like any other model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from inspector.errors import ModelError
from inspector.policy.base import ModelMeta, Policy, first_difference

#: Probabilities are clipped here before the log (the geometric mean of a zero is zero).
EPS = 1e-9


def check_compatible(metas: Sequence[ModelMeta], names: Sequence[str] | None = None) -> None:
    """Refuse members that do not read the same observation or share the verdict rule.

    :param metas: the members' metadata, lead first.
    :param names: how to name each member in the error (default: its position).
    :raises ModelError: fewer than two members, or a member that differs from the lead.
    """
    if len(metas) < 2:
        raise ModelError(f"an ensemble needs at least two models, got {len(metas)}")
    names = list(names) if names is not None else [f"model {i + 1}" for i in range(len(metas))]
    lead = metas[0]
    for name, m in zip(names[1:], metas[1:]):
        diff = first_difference(lead, m, ("classes", "actions", "state_size"))
        if diff is not None:
            field, theirs, mine = diff
            raise ModelError(
                f"{name}: {field} {mine!r} differ from {names[0]}'s"
                f" {theirs!r}; ensemble members must share them"
            )
        if dict(m.scan) != dict(lead.scan):
            raise ModelError(
                f"{name}: scan settings {dict(m.scan)} differ from {names[0]}'s"
                f" {dict(lead.scan)}; each member reads the lead's glimpses, so they must match"
            )
        if not np.allclose(m.outcome_matrix, lead.outcome_matrix):
            raise ModelError(
                f"{name}: its profile's outcome values differ from {names[0]}'s; the"
                " ensemble declares with one verdict rule"
            )


def ensemble_meta(
    metas: Sequence[ModelMeta], ok_bias: float = 0.0, max_zoom: int | None = None
) -> ModelMeta:
    """The lead's metadata, with the members' model sha256 and the ensemble's own bias
    and search depth."""
    return dataclasses.replace(
        metas[0],
        ensemble=tuple(m.model_sha256 for m in metas),
        ok_bias=float(ok_bias),
        max_zoom=max_zoom,
    )


def ensemble_sha256(member_sha256s: Sequence[str]) -> str:
    """The identity of an ensemble (its members' model files, lead first): what the
    ``operating_point.json`` of an ensemble directory was chosen for."""
    import hashlib

    return hashlib.sha256("\n".join(member_sha256s).encode("ascii")).hexdigest()


def geometric_mean(probs: Sequence[np.ndarray]) -> np.ndarray:
    """Normalised geometric mean of class probabilities ([N, C] each) -> [N, C]."""
    logp = np.mean([np.log(np.clip(np.asarray(p, np.float64), EPS, 1.0)) for p in probs], 0)
    logp -= logp.max(axis=-1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=-1, keepdims=True)


class EnsemblePolicy(Policy):
    """Members behind one :class:`Policy`: the lead's moves, the members' joint verdict.

    :param members: loaded policies, lead first (any backends).
    :param ok_bias: the ensemble's operating point (0: as combined).
    :param names: how errors name the members (e.g. their paths).
    :param max_zoom: the ensemble's search depth (None: every level).
    :raises ModelError: members that cannot form an ensemble (:func:`check_compatible`).
    """

    backend = "ensemble"

    def __init__(
        self,
        members: Sequence[Policy],
        ok_bias: float = 0.0,
        names: Sequence[str] | None = None,
        max_zoom: int | None = None,
    ) -> None:
        check_compatible([m.meta for m in members], names)
        super().__init__(ensemble_meta([m.meta for m in members], ok_bias, max_zoom))
        self.members = list(members)

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        logits, probs, value = self.members[0].forward(obs)
        rest = [m.forward(obs)[1] for m in self.members[1:]]
        return logits, geometric_mean([probs, *rest]).astype(np.float32), value

    def close(self) -> None:
        for m in self.members:
            m.close()
