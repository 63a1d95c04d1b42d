"""Third-party reward terms through the ``inspector`` entry-point group.

The demo package in ``tests/data/plugin_pkg`` is made visible to
``importlib.metadata`` by a dist-info directory (written from the package's own
pyproject) on a temporary ``sys.path`` entry, so the venv is never changed and the
other tests never see the plugin. One test installs it for real with
``pip install --target`` into a temporary directory.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inspector import EpisodeContext, Frame, PluginError, ProfileError, StepContext
from inspector.plugins import get_plugins, make_plugin_manager, reset_plugins
from inspector.profile import load_profile_text, profile_schema

PKG = Path("tests/data/plugin_pkg").resolve()

PROFILE = """\
name: zoomy
classes: [ok, bad]
step_budget: 6
terms:
  - term: bonus_for_zoom
    reward: 0.05
    params: {per_level: true}
  - term: correct_class
    reward: 1
"""


def write_dist_info(root: Path, dist: str, entry_points: dict[str, str]) -> None:
    info = root / f"{dist}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0\n")
    lines = ["[inspector]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def declared_entry_points() -> dict[str, str]:
    """The package's ``[project.entry-points.inspector]`` table (tomllib is 3.11+)."""
    text = (PKG / "pyproject.toml").read_text()
    section = re.search(
        r"^\[project\.entry-points\.inspector\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M
    )
    assert section, "pyproject.toml declares no inspector entry points"
    pairs = re.findall(r'^(\w+)\s*=\s*"([^"]+)"', section.group(1), re.M)
    return dict(pairs)


def forget_demo_modules() -> None:
    for name in [m for m in sys.modules if m.startswith("inspector_demo_terms")]:
        del sys.modules[name]


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """Put the demo package and its dist-info on sys.path; returns the site dir."""
    site = tmp_path / "site"
    write_dist_info(site, "inspector_demo_terms", declared_entry_points())
    monkeypatch.syspath_prepend(str(PKG))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("INSPECTOR_LOAD_PLUGINS", raising=False)
    reset_plugins()
    yield site
    reset_plugins()
    forget_demo_modules()


def test_third_party_term_is_usable_from_a_profile(plugin_path):
    plugins = get_plugins()
    assert "bonus_for_zoom" in plugins.reward_terms.names()
    assert plugins.reward_terms.plugin_of("bonus_for_zoom") == "demo_terms"
    profile = load_profile_text(PROFILE, "zoomy.yaml")
    (term, _) = profile.build_terms()
    frame = Frame(np.zeros((32, 32), np.uint8), "p", 0.0, "t")
    ep = EpisodeContext(frame, "ok", None, profile.classes, "ok", 6)
    ctx = StepContext(ep, 0, "zoom_in", (0, 0, 16, 16), 2, True, frame.image, True, False)
    assert term(ctx) == pytest.approx(0.1)
    # Its parameters are validated and appear in the schema like a built-in's.
    with pytest.raises(ProfileError, match="has no parameter 'per_lvl'"):
        load_profile_text(PROFILE.replace("per_level", "per_lvl"), "zoomy.yaml")
    with pytest.raises(ProfileError, match="per_level: expected true or false, got 3"):
        load_profile_text(PROFILE.replace("per_level: true", "per_level: 3"), "zoomy.yaml")
    assert (
        "bonus_for_zoom"
        in profile_schema()["properties"]["terms"]["items"]["properties"]["term"]["enum"]
    )


def test_without_the_plugin_the_term_is_unknown():
    reset_plugins()
    try:
        with pytest.raises(ProfileError, match="unknown term 'bonus_for_zoom'"):
            load_profile_text(PROFILE, "zoomy.yaml")
    finally:
        reset_plugins()


def test_inspector_load_plugins_limits_entry_points(plugin_path, monkeypatch):
    monkeypatch.setenv("INSPECTOR_LOAD_PLUGINS", "")
    assert "bonus_for_zoom" not in get_plugins().reward_terms.names()
    assert "step_cost" in get_plugins().reward_terms.names()  # built-ins always load
    with pytest.raises(ProfileError, match="unknown term 'bonus_for_zoom'"):
        load_profile_text(PROFILE, "zoomy.yaml")
    monkeypatch.setenv("INSPECTOR_LOAD_PLUGINS", "other, demo_terms")
    assert "bonus_for_zoom" in get_plugins().reward_terms.names()


def test_duplicate_term_name_names_both_plugins(plugin_path, monkeypatch):
    write_dist_info(plugin_path, "inspector_demo_dup", {"dup_terms": "inspector_demo_terms.dup"})
    with pytest.raises(PluginError) as ei:
        make_plugin_manager()
    msg = str(ei.value)
    assert "'step_cost'" in msg and "'plugins.process'" in msg and "'dup_terms'" in msg
    # Leaving the clashing plugin out is the way around it.
    monkeypatch.setenv("INSPECTOR_LOAD_PLUGINS", "demo_terms")
    assert "bonus_for_zoom" in make_plugin_manager().reward_terms.names()


def test_real_pip_install_into_a_target_dir(tmp_path, monkeypatch):
    """The package really installs (no index, no venv change) and exposes its entry point."""
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path / "target"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--target",
            str(target),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    monkeypatch.syspath_prepend(str(target))
    monkeypatch.delenv("INSPECTOR_LOAD_PLUGINS", raising=False)
    reset_plugins()
    try:
        assert get_plugins().reward_terms.plugin_of("bonus_for_zoom") == "demo_terms"
        assert load_profile_text(PROFILE, "zoomy.yaml").terms[0].term == "bonus_for_zoom"
    finally:
        reset_plugins()
        forget_demo_modules()
