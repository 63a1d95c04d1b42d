"""Shared fixtures."""

from __future__ import annotations

import pytest

from benchmarks.harness import magnetic_tile_root


@pytest.fixture(scope="session")
def magnetic_tile():
    """Path of the real magnetic-tile footage (skips when it is not beside the repo)."""
    root = magnetic_tile_root()
    if root is None:
        pytest.skip("magnetic-tile footage not found: set INSPECTOR_DATA or put ../shared beside")
    return root
