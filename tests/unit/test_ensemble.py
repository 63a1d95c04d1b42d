"""Verdict ensembles: the lead's moves, the members' geometric-mean verdict, refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from inspector.errors import ModelError
from inspector.policy.agent import run_episode
from inspector.policy.base import ModelMeta, Policy
from inspector.policy.ensemble import EnsemblePolicy, check_compatible, geometric_mean
from inspector.profile import ScanSettings
from inspector.scan import ACTIONS, Scanner, state_size

SCAN = ScanSettings(glimpse=16, overview=16, zoom_levels=2, memory=2)
META = ModelMeta(
    classes=("ok", "line", "point"),
    actions=ACTIONS,
    scan={"glimpse": 16, "overview": 16, "zoom_levels": 2, "memory": 2, "move_fraction": 0.5},
    state_size=state_size(SCAN),
    outcome_matrix=np.eye(3),
    model_sha256="a" * 64,
)


class Fixed(Policy):
    """Always the same outputs; moves through ``moves`` and then stops."""

    def __init__(self, probs, moves=(), meta=META) -> None:
        super().__init__(meta)
        self.probs = np.asarray(probs, np.float32)
        self.moves = list(moves)
        self.calls = 0

    def forward(self, obs):
        n = len(obs["state"])
        step = self.calls
        self.calls += 1
        a = self.moves[step] if step < len(self.moves) else self.stop_action
        logits = np.full((n, len(self.meta.actions)), -5.0, np.float32)
        logits[:, a] = 5.0
        return logits, np.tile(self.probs, (n, 1)), np.full((n, 1), float(step), np.float32)


def _obs(n=1):
    return {
        "glimpse": np.zeros((n, 2, 16, 16)),
        "overview": np.zeros((n, 1, 16, 16)),
        "state": np.zeros((n, META.state_size)),
    }


def test_the_verdict_is_the_normalised_geometric_mean_and_the_moves_are_the_leads():
    a = Fixed([0.6, 0.3, 0.1], moves=[1])
    b = Fixed([0.2, 0.2, 0.6], moves=[2])
    logits, probs, value = EnsemblePolicy([a, b]).forward(_obs())
    want = np.sqrt(np.array([0.6 * 0.2, 0.3 * 0.2, 0.1 * 0.6]))
    np.testing.assert_allclose(probs[0], want / want.sum(), rtol=1e-6)
    assert int(np.argmax(logits[0])) == 1  # the lead's move, not member b's
    assert value[0, 0] == 0.0


def test_identical_members_change_nothing_and_a_zero_probability_stays_finite():
    p = np.array([[0.7, 0.2, 0.1], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(geometric_mean([p, p, p]), p, atol=1e-8)
    mixed = geometric_mean([np.array([[0.0, 0.5, 0.5]]), np.array([[0.9, 0.05, 0.05]])])
    assert np.all(np.isfinite(mixed)) and mixed.sum() == pytest.approx(1.0)


def test_an_ensemble_looks_where_its_lead_looks():
    image = (np.random.default_rng(0).random((64, 64)) * 255).astype(np.uint8)
    moves = [ACTIONS.index("zoom_in"), ACTIONS.index("right")]
    alone = run_episode(Fixed([0.5, 0.3, 0.2], moves), Scanner(SCAN, 8), image, 8)
    lead, other = Fixed([0.5, 0.3, 0.2], moves), Fixed([0.1, 0.1, 0.8], [ACTIONS.index("left")])
    d = run_episode(EnsemblePolicy([lead, other]), Scanner(SCAN, 8), image, 8)
    assert d.actions == alone.actions and d.path == alone.path
    assert d.pixel_fraction == alone.pixel_fraction
    assert d.verdict == "point"  # the joint verdict: 0.05 / 0.03 / 0.16 before normalising


def test_the_metadata_names_the_members_and_the_ensemble_starts_uncalibrated():
    lead = dataclasses.replace(META, ok_bias=1.5)
    other = dataclasses.replace(META, model_sha256="b" * 64, ok_bias=-0.4)
    ens = EnsemblePolicy([Fixed([1, 0, 0], meta=lead), Fixed([1, 0, 0], meta=other)])
    assert ens.meta.ensemble == ("a" * 64, "b" * 64)
    assert ens.meta.ok_bias == 0.0
    back = ModelMeta.from_props(ens.meta.to_props())
    assert back.ensemble == ens.meta.ensemble
    assert ModelMeta.from_props(META.to_props()).ensemble == ()
    assert "inspector.ensemble" not in META.to_props()


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"classes": ("ok", "line", "scratch")}, "classes"),
        ({"scan": {**META.scan, "glimpse": 32}}, "scan settings"),
        ({"state_size": META.state_size + 1}, "state_size"),
        ({"outcome_matrix": 2 * np.eye(3)}, "outcome values"),
    ],
)
def test_members_that_read_another_observation_or_rule_are_refused(change, word):
    other = dataclasses.replace(META, **change)
    with pytest.raises(ModelError, match=f"runs/b: .*{word}"):
        check_compatible([META, other], ["runs/a", "runs/b"])


def test_one_model_is_not_an_ensemble():
    with pytest.raises(ModelError, match="at least two"):
        EnsemblePolicy([Fixed([1, 0, 0])])
