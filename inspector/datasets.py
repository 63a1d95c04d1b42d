"""Where the real footage lives: ``$INSPECTOR_DATA`` or ``../shared/datasets`` beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def magnetic_tile_root() -> Path | None:
    """The magnetic-tile data set folder (holding ``splits.csv``), or None when absent.

    ``INSPECTOR_DATA`` may point at the data set itself or at a folder that holds
    ``magnetic-tile``.
    """
    candidates = []
    env = os.environ.get("INSPECTOR_DATA")
    if env:
        candidates += [Path(env), Path(env) / "magnetic-tile"]
    candidates.append(REPO.parent / "shared" / "datasets" / "magnetic-tile")
    for c in candidates:
        if (c / "splits.csv").is_file():
            return c
    return None
