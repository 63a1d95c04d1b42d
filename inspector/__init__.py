"""inspector: an industrial visual-inspection agent (scan, focus, classify).

Public API for plugins and camera drivers; they import only from here.
"""

from __future__ import annotations

from inspector.camera import CameraDriver, CameraStats
from inspector.errors import (
    CameraError,
    ConfigError,
    ExportError,
    FootageError,
    InspectorError,
    MissingDependencyError,
    ModelError,
    PluginError,
    ProfileError,
    StationError,
)
from inspector.frames import Box, Frame, Truth
from inspector.hookspecs import hookimpl
from inspector.imageio import import_cv2
from inspector.terms import OUTCOME, PROCESS, EpisodeContext, RewardTerm, StepContext, level_ok

__version__ = "0.2.0"

__all__ = [
    "OUTCOME",
    "PROCESS",
    "Box",
    "CameraDriver",
    "CameraError",
    "CameraStats",
    "ConfigError",
    "EpisodeContext",
    "ExportError",
    "FootageError",
    "Frame",
    "InspectorError",
    "MissingDependencyError",
    "ModelError",
    "PluginError",
    "ProfileError",
    "RewardTerm",
    "StationError",
    "StepContext",
    "Truth",
    "__version__",
    "hookimpl",
    "import_cv2",
    "level_ok",
]


def _register_env() -> None:
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - gymnasium is a hard dependency
        return
    if "inspector/Inspect-v0" not in gymnasium.registry:
        gymnasium.register(id="inspector/Inspect-v0", entry_point="inspector.env:InspectionEnv")


_register_env()
