"""The built-in drivers as the registry sees them, and open_camera's errors."""

from __future__ import annotations

import inspect

import pytest

from inspector import CameraDriver, CameraError
from inspector.camera import driver_params, open_camera
from inspector.plugins import get_plugins

BUILTIN = {
    "synthetic": "camera_drivers.synthetic",
    "folder": "camera_drivers.folder",
    "video": "camera_drivers.video",
    "opencv": "camera_drivers.live",
}


def test_builtin_drivers_are_registered_by_their_modules():
    reg = get_plugins().camera_drivers
    for name, module in BUILTIN.items():
        factory = reg.get(name)
        assert reg.plugin_of(name) == module
        assert inspect.isclass(factory) and issubclass(factory, CameraDriver)
        # Every parameter is documented in the class docstring and has a type hint.
        for pname, p in driver_params(factory).items():
            assert f":param {pname}:" in (factory.__doc__ or ""), (name, pname)
            assert p.annotation is not inspect.Parameter.empty, (name, pname)
    assert reg.get("synthetic").has_truth and reg.get("folder").has_truth
    assert not reg.get("video").has_truth and not reg.get("opencv").has_truth


def test_unknown_driver_names_the_known_ones():
    with pytest.raises(CameraError) as exc:
        open_camera("foldr")
    msg = str(exc.value)
    assert "unknown camera driver 'foldr'" in msg and "did you mean 'folder'" in msg
    assert "known: folder, opencv, store, synthetic, video" in msg


def test_unknown_parameter_lists_the_expected_ones():
    with pytest.raises(CameraError) as exc:
        open_camera("video", {"path": "x.avi", "evry": "2"})
    msg = str(exc.value)
    assert "has no parameter 'evry' (did you mean 'every'?)" in msg
    assert "expected one of: path, loop, every, grayscale" in msg


def test_bad_values_and_missing_parameters():
    with pytest.raises(CameraError, match="defect_rate: expected float, got 'lots'"):
        open_camera("synthetic", {"defect_rate": "lots"})
    with pytest.raises(CameraError, match=r"class_mix: expected key:value"):
        open_camera("synthetic", {"class_mix": "line"})
    with pytest.raises(CameraError, match=r"needs parameter\(s\): source"):
        open_camera("opencv", {})
