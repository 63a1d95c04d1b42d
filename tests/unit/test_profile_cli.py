"""``inspector profile check|schema|explain`` through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from inspector.cli import build_parser, main

SHIPPED = sorted(str(p) for p in Path("reward_profiles").glob("*.yaml"))


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "main.py", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def test_check_shipped_profiles_exits_0():
    r = run("profile", "check", *SHIPPED)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"ok {p}" for p in SHIPPED]
    assert r.stderr == ""


def test_broken_copy_exits_2_with_one_line(tmp_path):
    text = Path("reward_profiles/lcd_panel.yaml").read_text()
    broken = tmp_path / "lcd_broken.yaml"
    broken.write_text(text.replace("step_budget: 12", "step_budget: twelve"))
    r = run("profile", "check", str(broken))
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    line_no = text.splitlines().index("step_budget: 12") + 1
    assert lines[0] == (f"{broken}:{line_no}:14: step_budget: expected an integer, got 'twelve'")
    assert "Traceback" not in r.stderr


def test_check_reads_standard_input():
    good = Path("reward_profiles/sparse.yaml").read_text()
    assert run("profile", "check", "-", stdin=good).returncode == 0
    r = run("profile", "check", "-", stdin=good.replace("step_budget: 12", "step_budget: -1"))
    assert r.returncode == 2
    assert r.stderr.startswith("<stdin>:") and "step_budget: must be between 1 and 1000" in r.stderr


def test_check_reports_each_file_and_warnings(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    warn = "tests/data/profiles/good/warn_zero.yaml"
    rc = main(["profile", "check", SHIPPED[0], str(bad), warn])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out.splitlines() == [f"ok {SHIPPED[0]}", f"ok {warn}"]
    assert f"{bad}:1:1: missing required key 'classes'" in err
    assert f"{warn}: warning: all rewards are zero" in err
    assert main(["profile", "check", "--strict", warn]) == 2
    assert main(["profile", "check", str(tmp_path / "missing.yaml")]) == 2


def test_schema_prints_and_writes(tmp_path, capsys):
    assert main(["profile", "schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(printed)
    out = tmp_path / "profile.schema.json"
    assert main(["profile", "schema", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == printed
    assert main(["profile", "schema", "--out", str(tmp_path / "no" / "such" / "dir.json")]) == 2


def test_explain_arguments_are_parsed():
    args = build_parser().parse_args(
        [
            "profile",
            "explain",
            "reward_profiles/lcd_panel.yaml",
            "--camera",
            "synthetic",
            "--param",
            "seed=3",
            "--param",
            "size=64",
            "--episodes",
            "2",
            "--json",
            "out.json",
            "--plot",
            "out.png",
            "--seed",
            "5",
        ]
    )
    assert args.file == "reward_profiles/lcd_panel.yaml"
    assert args.param == ["seed=3", "size=64"]
    assert (args.episodes, args.json, args.plot, args.model, args.seed) == (
        2,
        "out.json",
        "out.png",
        None,
        5,
    )
    assert callable(args.func)


def test_profile_needs_a_subverb():
    with pytest.raises(SystemExit) as ei:
        build_parser().parse_args(["profile"])
    assert ei.value.code == 2
