"""``train --members --resume`` against a run started with other settings: refused, and
the error names the option that resumes it as it started (a preset's defaults change)."""

from __future__ import annotations

import json

import pytest

from inspector.errors import InspectorError
from inspector.train.members import SUMMARY_FILE, _check_same_run

STARTED = {"members": 4, "timesteps": 300000, "distill_timesteps": 150000, "seed": 4}


def test_a_changed_setting_is_refused_with_the_option_that_restores_it(tmp_path):
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"asked": STARTED}))
    _check_same_run(tmp_path, STARTED)  # the same: resumes
    with pytest.raises(InspectorError, match="add --distill-timesteps 150000; or choose"):
        _check_same_run(tmp_path, {**STARTED, "distill_timesteps": 100000})
    with pytest.raises(InspectorError, match="add --seed 4"):
        _check_same_run(tmp_path, {**STARTED, "seed": 5})
    _check_same_run(tmp_path / "new", {**STARTED, "seed": 5})  # nothing started there
