"""The verdict ensemble of a ``--members`` run, and the teacher that distils it into a student.

An ensemble directory (``RUN/ensemble``) holds ``ensemble.json``: the member run
directories (relative to it), lead first. It is what ``export`` turns into one ONNX
graph (:class:`inspector.train.torch_policy.EnsembleGraph`) and what
:func:`ensemble_policy` runs for the report: the lead's moves, the members' joint
verdict (:mod:`inspector.policy.ensemble`).

:class:`EnsembleTeacher` is the same ensemble as a teacher for the hybrid loss's KL
term (:class:`inspector.train.hybrid.HybridPPO` calls ``teacher.get_distribution(obs)``
on each minibatch): the move component is the lead's distribution, the verdict
component the normalised geometric mean of the members' class probabilities, exactly
what the exported ensemble computes. The student reads its own rollouts' observations
and the members judge them, so the student is taught on the states it visits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch as th

from inspector.errors import ModelError
from inspector.policy.ensemble import EPS

#: The file that makes a directory an ensemble.
ENSEMBLE_FILE = "ensemble.json"


def is_ensemble_dir(path: str | Path) -> bool:
    """Whether ``path`` is an ensemble directory (holds ``ensemble.json``)."""
    return (Path(path) / ENSEMBLE_FILE).is_file()


def write_ensemble(folder: str | Path, members: Sequence[str | Path]) -> Path:
    """Write ``folder/ensemble.json`` naming ``members`` (lead first), relative to it.

    :returns: the ensemble directory.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rel = [Path(_relpath(Path(m), folder)).as_posix() for m in members]
    tmp = folder / f".{ENSEMBLE_FILE}.tmp"
    tmp.write_text(json.dumps({"members": rel, "lead": rel[0]}, indent=2) + "\n")
    tmp.replace(folder / ENSEMBLE_FILE)
    return folder


def _relpath(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), start.resolve())


def ensemble_members(folder: str | Path) -> list[Path]:
    """The member run directories of an ensemble directory, lead first.

    :raises ModelError: no or a broken ``ensemble.json``, or a member that is missing.
    """
    folder = Path(folder)
    path = folder / ENSEMBLE_FILE
    try:
        doc = json.loads(path.read_text())
        names = [str(m) for m in doc["members"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{path}: not an ensemble description ({exc})") from None
    if len(names) < 2:
        raise ModelError(f"{path}: an ensemble needs at least two members, got {len(names)}")
    members = [(folder / n).resolve() for n in names]
    for m in members:
        if not (m / "model.zip").is_file():
            raise ModelError(f"{path}: member {m} has no model.zip (not trained to the end?)")
    return members


def ensemble_policy(folder: str | Path, calibrated: bool = True) -> Any:
    """The ensemble of ``folder`` as an :class:`inspector.policy.ensemble.EnsemblePolicy`
    of torch members (each at its own calibrated operating point).

    :param calibrated: start at the ensemble's operating point (``operating_point.json``
        of ``folder``, written by ``train --members`` for these member files); else at 0.
    """
    from inspector.policy.ensemble import EnsemblePolicy, ensemble_sha256
    from inspector.policy.operating_point import read_calibrated
    from inspector.train.torch_policy import TorchPolicy, load_trained, meta_for_model

    members = ensemble_members(folder)
    policies = []
    for m in members:
        model, profile, sha = load_trained(m)
        policies.append(TorchPolicy(model, meta_for_model(model, profile, sha)))
    point: dict = {}
    if calibrated:
        point = read_calibrated(folder, ensemble_sha256([p.meta.model_sha256 for p in policies]))
    return EnsemblePolicy(policies, names=[str(m) for m in members], **point)


class _Joint:
    """What ``HybridPPO._kd_loss`` reads from a teacher's distribution: ``.distribution``,
    one ``torch.distributions.Categorical`` per action component."""

    def __init__(self, cats: list[th.distributions.Categorical]) -> None:
        self.distribution = cats


class EnsembleTeacher:
    """A verdict ensemble as the hybrid loss's teacher.

    :param policies: the members' SB3 policies, lead first (same observation and actions).
    """

    def __init__(self, policies: Sequence[Any]) -> None:
        if len(policies) < 2:
            raise ValueError(f"an ensemble teacher needs two members, got {len(policies)}")
        self.policies = list(policies)
        self.set_training_mode(False)

    def set_training_mode(self, mode: bool) -> None:
        """The members never train (called by HybridPPO with False)."""
        for p in self.policies:
            p.set_training_mode(False)

    def get_distribution(self, obs: Any) -> _Joint:
        """The lead's move distribution and the members' geometric-mean verdict on ``obs``."""
        with th.no_grad():
            cats = [p.get_distribution(obs).distribution for p in self.policies]
            logp = th.stack([th.log(th.clamp(c[-1].probs, EPS, 1.0)) for c in cats]).mean(0)
            lead_moves = th.distributions.Categorical(logits=cats[0][0].logits)
            verdict = th.distributions.Categorical(logits=th.log_softmax(logp, dim=-1))
        return _Joint([lead_moves, verdict])


def load_ensemble_teacher(folder: str | Path) -> EnsembleTeacher:
    """The :class:`EnsembleTeacher` of an ensemble directory.

    :raises ModelError: a member that is missing or cannot be loaded.
    """
    from inspector.train.torch_policy import load_trained

    return EnsembleTeacher([load_trained(m)[0].policy for m in ensemble_members(folder)])
