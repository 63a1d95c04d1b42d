"""Loading reward profiles into the dataclasses the environment and the RRM use."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest

from inspector import EpisodeContext, Frame, ProfileError, StepContext
from inspector.profile import (
    Profile,
    ProfileWarning,
    check_profile,
    load_profile,
    load_profile_text,
)

SHIPPED = sorted(Path("reward_profiles").glob("*.yaml"))


def test_the_shipped_profiles():
    assert {p.stem for p in SHIPPED} == {"lcd_panel", "lcd_quadrants", "magnetic_tile", "sparse"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_profiles_load_without_warnings(path):
    profile = load_profile(str(path))
    assert isinstance(profile, Profile)
    assert profile.name == path.stem
    assert profile.classes[0] == profile.ok_class
    assert profile.warnings == ()
    assert check_profile(str(path)) == []
    assert profile.path == str(path)
    assert profile.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # The environment pickles profiles into subprocess workers.
    assert pickle.loads(pickle.dumps(profile)) == profile


def test_lcd_panel_contents():
    p = load_profile("reward_profiles/lcd_panel.yaml")
    assert p.classes == ("ok", "line", "point")
    assert p.step_budget == 12
    assert p.scan.glimpse == 32 and p.scan.zoom_levels == 3
    by_name = {t.term: t for t in p.terms}
    assert by_name["focus_defect"].reward == 0.3
    assert by_name["focus_defect"].params == {"min_overlap": 0.5}
    assert by_name["correct_class"].reward == {"line": 0.5, "point": 0.2, "ok": 0.2}
    assert by_name["false_alarm"].reward == -0.8
    assert by_name["step_cost"].reward == -0.01
    assert {"missed_defect", "wrong_class", "no_verdict"} <= set(by_name)
    assert by_name["correct_class"].channel == "outcome"
    assert by_name["focus_defect"].channel == "process"
    lines = Path("reward_profiles/lcd_panel.yaml").read_text().splitlines()
    assert "term: focus_defect" in lines[by_name["focus_defect"].line - 1]
    assert p.rrm.redistribution.method == "exponential"
    assert p.rrm.redistribution.lam == 0.15 and p.rrm.redistribution.window == 20
    assert p.rrm.normalisation.method == "running" and p.rrm.normalisation.clip == 10.0
    assert not p.rrm.is_identity


def test_magnetic_tile_contents():
    p = load_profile("reward_profiles/magnetic_tile.yaml")
    assert p.classes == ("free", "blowhole", "break", "crack", "fray", "uneven")
    assert p.ok_class == "free"
    assert p.defect_classes == ("blowhole", "break", "crack", "fray", "uneven")
    assert p.rrm.shaping.potential == "focus_quality"
    assert p.build_potential().is_potential


def test_sparse_is_the_identity_baseline():
    p = load_profile("reward_profiles/sparse.yaml")
    assert [t.term for t in p.terms] == ["correct_class"]
    assert p.rrm.is_identity
    m = p.outcome_matrix()
    assert np.array_equal(m, np.eye(len(p.classes)))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_built_terms_run_through_an_episode(path):
    """Every term of every shipped profile survives reset and a scripted episode."""
    p = load_profile(str(path))
    terms = p.build_terms()
    pot = p.build_potential()
    h, w = 96, 128
    mask = np.zeros((h, w), bool)
    mask[40:44, 60:64] = True
    frame = Frame(np.random.default_rng(0).integers(0, 255, (h, w), np.uint8), "p", 0.0, "t")
    ep = EpisodeContext(frame, p.defect_classes[0], mask, p.classes, p.ok_class, p.step_budget)
    for t in terms:
        t.reset(ep)
    if pot is not None:
        pot.reset(ep)
        assert pot.potential(ep) == 0.0
    rects = [(0, 0, w, h), (0, 0, 64, 48), (48, 32, 80, 64), (48, 32, 80, 64)]
    levels = [0, 1, 2, 2]
    total = 0.0
    for i, (rect, lvl) in enumerate(zip(rects, levels)):
        last = i == len(rects) - 1
        ctx = StepContext(
            episode=ep,
            step=i,
            action="stop" if last else "zoom_in",
            rect=rect,
            level=lvl,
            native=lvl == 2,
            glimpse=np.ascontiguousarray(frame.image[:32, :32]),
            moved=i != 3,
            revisit=i == 3,
            verdict=p.defect_classes[0] if last else None,
            terminated=last,
            extra={"levels": 3},
        )
        for t in terms:
            v = t(ctx)
            assert np.isfinite(v)
            total += v
        if pot is not None:
            assert np.isfinite(pot.potential(ctx))
    assert total > 0  # found and named the defect


def test_load_profile_text_and_path():
    text = Path("reward_profiles/sparse.yaml").read_text()
    p = load_profile_text(text)
    assert p.path == ""
    assert p.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert p == load_profile_text(text.encode(), "x.yaml")


def test_defaults_fill_missing_sections():
    p = load_profile_text(
        "name: m\nclasses: [ok, bad]\nstep_budget: 3\nterms: [{term: correct_class, reward: 1}]\n"
    )
    assert p.ok_class == "ok"
    assert p.scan.glimpse == 32
    assert p.rrm.is_identity
    assert p.terms[0].reward == 1.0 and isinstance(p.terms[0].reward, float)


def test_missing_file_is_a_profile_error(tmp_path):
    with pytest.raises(ProfileError) as ei:
        load_profile(str(tmp_path / "nope.yaml"))
    assert ei.value.file == str(tmp_path / "nope.yaml")
    assert "cannot read" in str(ei.value)
    with pytest.raises(ProfileError):
        load_profile(str(tmp_path))  # a directory


def test_warnings_are_issued_and_returned():
    path = "tests/data/profiles/good/warn_zero.yaml"
    with pytest.warns(ProfileWarning) as record:
        p = load_profile(path)
    assert any("all rewards are zero" in str(r.message) for r in record)
    assert any("all rewards are zero" in w for w in p.warnings)
    found = check_profile(path)
    assert any("no outcome term" in w for w in found)


def test_step_cost_warning_threshold():
    base = (
        "name: m\nclasses: [ok, bad]\nstep_budget: {b}\nterms:\n"
        "  - {{term: correct_class, reward: 1.0}}\n  - {{term: step_cost, reward: -0.1}}\n"
    )
    assert load_profile_text(base.format(b=10), warn=False).warnings == ()
    (w,) = load_profile_text(base.format(b=11), warn=False).warnings
    assert "step_cost" in w and "11" in w


def test_error_text_has_file_line_column_and_path():
    text = Path("reward_profiles/lcd_panel.yaml").read_text().replace("reward: -0.8", "reward: hi")
    with pytest.raises(ProfileError) as ei:
        load_profile_text(text, "reward_profiles/x.yaml")
    e = ei.value
    assert (e.file, e.path) == ("reward_profiles/x.yaml", "terms[2].reward")
    assert str(e) == (
        f"reward_profiles/x.yaml:{e.line}:{e.column}: terms[2].reward: expected a number, got 'hi'"
    )
    assert text.splitlines()[e.line - 1][e.column - 1 :] == "hi"
