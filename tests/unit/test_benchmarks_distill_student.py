"""distill_student's prefix: the model a shorter run of the same rounds would keep."""

from __future__ import annotations

from benchmarks.studies.distill_student.cli import prefix_choice


def _check(steps: int, score: float, auroc: float) -> dict:
    return {"steps": steps, "operating_point": score, "defect_auroc": auroc}


def test_prefix_keeps_the_best_check_within_its_steps_as_the_run_would(tmp_path):
    checks = [
        _check(0, 0.99, 0.99),  # before distillation: no checkpoint, never kept
        _check(100, 0.80, 0.90),
        _check(200, 0.95, 0.99),
        _check(300, 0.95, 0.98),  # equal score, lower tie-breaker: not kept
        _check(400, 0.99, 0.99),  # beyond the prefix
    ]
    for c in checks[1:]:
        (tmp_path / f"ckpt_{c['steps']:09d}.zip").write_bytes(b"")
    best = prefix_choice(checks, 300, "operating_point", tmp_path)
    assert best["steps"] == 200 and best["checkpoint"] == tmp_path / "ckpt_000000200.zip"
    # equal on both keys: the later check, as BestOnVal keeps it
    checks[3]["defect_auroc"] = 0.99
    assert prefix_choice(checks, 300, "operating_point", tmp_path)["steps"] == 300
    assert prefix_choice(checks, 400, "operating_point", tmp_path)["steps"] == 400
    # a check whose checkpoint is gone cannot be kept
    (tmp_path / "ckpt_000000300.zip").unlink()
    assert prefix_choice(checks, 300, "operating_point", tmp_path)["steps"] == 200
    assert prefix_choice(checks, 50, "operating_point", tmp_path) is None
