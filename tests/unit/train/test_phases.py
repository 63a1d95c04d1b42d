"""Where a run's CPU time goes: phases, nesting, flushing, resuming."""

from __future__ import annotations

import json
import time

from inspector.train.phases import FILE, PhaseClock


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_nested_phases_count_once_and_a_flush_saves_the_open_one(tmp_path):
    clock = PhaseClock(tmp_path)
    with clock.phase("ppo"):
        _spin(0.05)
        with clock.phase("val_checks"):
            _spin(0.05)
        clock.flush()
        flushed = json.loads((tmp_path / FILE).read_text())
        assert flushed["ppo"] >= 0.04 and flushed["val_checks"] >= 0.04
        _spin(0.02)
    s = clock.seconds
    assert s["val_checks"] < 0.1 and 0.06 <= s["ppo"] < 0.12  # the check is not PPO's
    again = PhaseClock(tmp_path, fresh=False)  # a resumed run adds to it
    assert again.get("ppo") == s["ppo"]
    assert PhaseClock(tmp_path, fresh=True).get("ppo") == 0.0
