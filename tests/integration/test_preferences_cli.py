"""``inspector profile pairs`` and ``profile fit`` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from inspector.profile import load_profile
from inspector.rrm.preference_records import Preference, load_preferences, profile_values
from inspector.workflows.preferences import simulate_pairs

LCD = "reward_profiles/lcd_panel.yaml"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "main.py", *args],
        capture_output=True,
        text=True,
        timeout=300,
        input=stdin,
    )


def test_pairs_records_answers_from_stdin(tmp_path):
    out = tmp_path / "prefs.jsonl"
    r = run(
        "profile",
        "pairs",
        LCD,
        "--out",
        str(out),
        "--count",
        "5",
        "--param",
        "size=128",
        "--judge",
        "ci",
        stdin="a\nb\ntie\nskip\n",
    )
    assert r.returncode == 0, r.stderr
    assert "recorded 3 preference(s)" in r.stdout
    prefs, _ = load_preferences(str(out))
    assert [p.choice for p in prefs] == ["a", "b", "tie"]
    lcd = load_profile(LCD, warn=False)
    for p in prefs:
        assert p.profile_sha256 == lcd.sha256 and p.values == profile_values(lcd)
        assert p.judge == "ci" and p.a.terms != p.b.terms
        assert set(p.a.terms) == {t.term for t in lcd.terms}
    # Every pair shown has its image (the fifth was shown, then input ended).
    assert len(list((tmp_path / "prefs-pairs").glob("pair-0-*.png"))) == 5


def test_pairs_rejects_a_bad_answer_in_one_line(tmp_path):
    r = run(
        "profile",
        "pairs",
        LCD,
        "--out",
        str(tmp_path / "p.jsonl"),
        "--count",
        "2",
        "--param",
        "size=128",
        stdin="maybe\n",
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("inspector: error: answer 'maybe'")


def _judged(tmp_path: Path, hidden: dict[str, float], n: int, seed: int) -> Path:
    """Pairs from the synthetic line, judged by ``hidden`` factors on the LCD values."""
    lcd = load_profile(LCD, warn=False)
    out = tmp_path / "judged.jsonl"
    with out.open("w") as fh:
        for part, a, b in simulate_pairs(lcd, n, params={"size": 128}, seed=seed):
            ua = sum(hidden.get(k, 1.0) * v for k, v in a.terms.items())
            ub = sum(hidden.get(k, 1.0) * v for k, v in b.terms.items())
            choice = "tie" if abs(ua - ub) < 1e-12 else ("a" if ua > ub else "b")
            p = Preference(part, a, b, choice, profile_values(lcd), lcd.sha256)
            fh.write(json.dumps(p.to_json()) + "\n")
    return out


def test_fit_writes_a_new_version_with_provenance(tmp_path):
    # A judge to whom every step costs five times what the profile says.
    prefs = _judged(tmp_path, {"step_cost": 5.0}, 80, seed=1)
    new = tmp_path / "lcd_fitted.yaml"
    r = run(
        "profile", "fit", LCD, "--preferences", str(prefs), "--out", str(new), "--pin", "no_verdict"
    )
    assert r.returncode == 0, r.stderr
    assert "fitted lcd_panel to 80 preference(s)" in r.stdout
    assert f"wrote {new}" in r.stdout
    lcd, fitted = load_profile(LCD, warn=False), load_profile(str(new), warn=False)
    prov = fitted.provenance
    assert prov["parent_sha256"] == lcd.sha256 and prov["preferences"] == 80
    assert prov["pinned"] == ["no_verdict"] and prov["heldout_pairs"] > 0
    assert 0.0 <= prov["heldout_agreement"] <= 1.0 and prov["log_likelihood"] < 0
    old = {t.term: t.reward for t in lcd.terms}
    new_vals = {t.term: t.reward for t in fitted.terms}
    assert new_vals["no_verdict"] == old["no_verdict"]
    assert new_vals["step_cost"] < old["step_cost"] < 0  # a larger cost, same sign
    step_line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("step_cost"))
    assert "->" in step_line and "%" in step_line
    # The new version fits again from the same pairs (they convert through 'values').
    again = tmp_path / "again.yaml"
    r2 = run("profile", "fit", str(new), "--preferences", str(prefs), "--out", str(again))
    assert r2.returncode == 0, r2.stderr
    assert load_profile(str(again), warn=False).provenance["parent_sha256"] == fitted.sha256


def test_fit_refuses_contradictions_in_one_line(tmp_path):
    prefs = _judged(tmp_path, {}, 30, seed=2)
    rows = [json.loads(ln) for ln in prefs.read_text().splitlines()]
    both = rows + [{**r, "choice": {"a": "b", "b": "a", "tie": "tie"}[r["choice"]]} for r in rows]
    prefs.write_text("".join(json.dumps(r) + "\n" for r in both))
    r = run("profile", "fit", LCD, "--preferences", str(prefs), "--out", str(tmp_path / "x.yaml"))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "better than chance" in r.stderr and not (tmp_path / "x.yaml").exists()
