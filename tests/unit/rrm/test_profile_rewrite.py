"""New values written over the old numbers, comments and layout kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.errors import ProfileError
from inspector.profile import load_profile_text
from inspector.rrm.profile_rewrite import format_number, rewrite_values

LCD = Path("reward_profiles/lcd_panel.yaml").read_text()
PROV = {"parent_sha256": "a" * 64, "method": "bradley-terry", "preferences": 12}


def test_values_change_and_nothing_else():
    out = rewrite_values(
        LCD,
        "lcd.yaml",
        {"correct_class": {"line": 0.61, "point": 0.25, "ok": 0.1}, "step_cost": -0.00002},
        PROV,
    )
    p = load_profile_text(out, warn=False)
    vals = {t.term: t.reward for t in p.terms}
    assert vals["correct_class"] == {"line": 0.61, "point": 0.25, "ok": 0.1}
    assert vals["step_cost"] == -0.00002
    assert vals["false_alarm"] == -0.8
    assert p.provenance == PROV
    # Comments and the flow style survive; only the changed lines differ.
    old, new = LCD.splitlines(), out.splitlines()
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    assert changed == [
        (
            "    reward: {line: 0.5, point: 0.2, ok: 0.2}",
            "    reward: {line: 0.61, point: 0.25, ok: 0.1}",
        ),
        ("    reward: -0.01", "    reward: -0.00002"),
    ]
    assert new[: len(old)][0].startswith("# LCD panels")


def test_provenance_is_replaced_not_stacked():
    once = rewrite_values(LCD, "x", {"step_cost": -0.02}, PROV)
    twice = rewrite_values(once, "x", {"step_cost": -0.03}, {**PROV, "preferences": 40})
    assert twice.count("provenance:") == 1
    assert twice.count("# Written by `inspector profile fit`") == 1
    assert load_profile_text(twice, warn=False).provenance["preferences"] == 40


def test_provenance_in_the_middle_is_removed_whole():
    text = LCD.replace(
        "terms:",
        "provenance:\n  parent_sha256: " + "b" * 64 + "\n  method: bradley-terry\n"
        "# the terms\nterms:",
    )
    out = rewrite_values(text, "x", {}, PROV)
    assert "b" * 64 not in out and "# the terms" in out
    assert load_profile_text(out, warn=False).provenance == PROV


def test_bad_provenance_is_a_profile_error():
    with pytest.raises(ProfileError, match="provenance.parent_sha256"):
        rewrite_values(LCD, "x", {}, {"parent_sha256": "nope", "method": "bradley-terry"})


def test_per_class_keys_must_match():
    with pytest.raises(ProfileError, match="same classes"):
        rewrite_values(LCD, "x", {"correct_class": {"line": 1.0}})


@pytest.mark.parametrize("v", [1.0, 1e-5, -2.5e-7, 123456789.0, 0.3, 1e20, -0.0])
def test_numbers_read_back_as_floats(v):
    import yaml

    assert yaml.safe_load(format_number(v)) == pytest.approx(v)
