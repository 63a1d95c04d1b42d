"""The ensemble teacher of ``train --members``: the exported ensemble's moves and verdict,
the KL term it drives, the ensemble directory, local sizing and the Ray extra."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch as th
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.logger import configure

from inspector.errors import InspectorError, ModelError
from inspector.scan import ACTIONS
from inspector.train.cluster import import_ray, local_parallelism, member_cpus
from inspector.train.config import TrainConfig
from inspector.train.distill import (
    EnsembleTeacher,
    ensemble_members,
    is_ensemble_dir,
    write_ensemble,
)
from inspector.train.torch_policy import EnsembleGraph, PolicyGraph
from tests.unit.rrm.test_buffer import collect, tiny_model, tiny_profile


@pytest.fixture(scope="module")
def members():
    prof = tiny_profile()
    return [tiny_model(prof, seed=s) for s in range(3)]


def _obs(model):
    buf = model.rollout_buffer
    return {k: th.as_tensor(v.reshape(-1, *v.shape[2:])) for k, v in buf.observations.items()}


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_the_teacher_is_the_exported_ensemble_moves_of_the_lead_verdict_of_all(members, seed):
    prof = tiny_profile()
    rng = np.random.default_rng(seed)
    sc = prof.scan
    from inspector.scan import state_size

    n = 5
    obs = {
        "glimpse": th.as_tensor(
            rng.integers(0, 256, (n, sc.memory, sc.glimpse, sc.glimpse))
        ).float(),
        "overview": th.as_tensor(rng.integers(0, 256, (n, 1, sc.overview, sc.overview))).float(),
        "state": th.as_tensor(rng.random((n, state_size(sc)))).float(),
    }
    teacher = EnsembleTeacher([m.policy for m in members])
    move, verdict = teacher.get_distribution(obs).distribution
    graph = EnsembleGraph([PolicyGraph(m.policy, len(ACTIONS)) for m in members])
    with th.no_grad():
        lead_moves, probs, _ = graph(obs["glimpse"], obs["overview"], obs["state"])
    th.testing.assert_close(verdict.probs, probs, rtol=1e-5, atol=1e-6)
    th.testing.assert_close(move.probs, th.softmax(lead_moves, dim=1), rtol=1e-5, atol=1e-6)


def test_the_ensemble_teacher_drives_the_kl_term(members):
    from inspector.rrm.buffer import RRMRolloutBuffer  # noqa: F401 (the buffer tiny_model uses)

    prof = tiny_profile()
    student = tiny_model(
        prof, seed=7, w_kd=1.0, teacher=EnsembleTeacher([m.policy for m in members])
    )
    student.policy.load_state_dict(members[0].policy.state_dict())
    collect(student)
    student.set_logger(configure(None, []))
    student.train()
    kd = student.logger.name_to_value.get("train/kd_loss")
    assert kd is not None and kd > 0.0  # the lead alone differs from the members' verdict
    # The teacher never trains.
    assert all(not m.policy.training for m in members)


def test_an_ensemble_directory_names_its_members_relative_to_it(tmp_path):
    runs = [tmp_path / "members" / f"m{i}" for i in range(2)]
    for r in runs:
        r.mkdir(parents=True)
        (r / "model.zip").write_bytes(b"x")
    ens = write_ensemble(tmp_path / "ensemble", runs)
    assert is_ensemble_dir(ens) and not is_ensemble_dir(runs[0])
    moved = tmp_path.rename(tmp_path.with_name(tmp_path.name + "_moved"))
    assert ensemble_members(moved / "ensemble") == [
        (moved / "members" / f"m{i}").resolve() for i in range(2)
    ]
    (moved / "members" / "m1" / "model.zip").unlink()
    with pytest.raises(ModelError, match="m1 has no model.zip"):
        ensemble_members(moved / "ensemble")
    (moved / "ensemble" / "ensemble.json").write_text('{"members": ["../members/m0"]}')
    with pytest.raises(ModelError, match="at least two"):
        ensemble_members(moved / "ensemble")


def test_local_members_are_sized_to_the_cores(monkeypatch):
    import inspector.train.cluster as cluster

    monkeypatch.setattr(cluster, "cores", lambda: 8)
    cfg = TrainConfig()
    assert member_cpus(cfg) == 1 and local_parallelism(cfg, 4) == 4
    sub = cfg.replace(vec_env="subproc", n_envs=4)
    assert member_cpus(sub) == 4 and local_parallelism(sub, 4) == 2
    assert local_parallelism(sub, 4, parallel=1) == 1
    monkeypatch.setattr(cluster, "cores", lambda: 1)
    assert local_parallelism(sub, 4) == 1
    with pytest.raises(InspectorError):
        local_parallelism(cfg, 4, parallel=0)


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InspectorError, match=r"pip install 'inspector\[ray\]'"):
        import_ray()


def test_the_export_of_a_members_run_names_student_and_ensemble(tmp_path):
    from inspector.commands.export import _members_run

    (tmp_path / "members.json").write_text("{}")
    with pytest.raises(InspectorError, match="student.*ensemble"):
        _members_run(tmp_path, [])
