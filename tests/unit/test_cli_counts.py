"""Count arguments of every verb: zero, negative or non-numeric is a usage error (exit 2)."""

from __future__ import annotations

import pytest

from inspector.cli import main

CASES = [
    (["train", "--camera", "synthetic", "--profile", "p.yaml", "--out", "o", "--timesteps"], "0"),
    (["train", "--camera", "synthetic", "--profile", "p.yaml", "--out", "o", "--timesteps", "8",
      "--n-envs"], "-1"),
    (["demo", "--parts"], "0"),
    (["demo", "--bc-samples"], "-5"),
    (["demo", "--seed"], "-1"),
    (["export", "--model", "m", "--out", "o.onnx", "--observations"], "0"),
    (["run", "--config", "s.yaml", "--max-parts"], "0"),
    (["retrain", "--footage", "f", "--base", "b", "--out", "o", "--timesteps"], "ten"),
    (["profile", "explain", "p.yaml", "--episodes"], "0"),
    (["footage", "review", "--store", "s", "--n"], "0"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "bad"), CASES, ids=[" ".join(a[:1] + a[-1:]) for a, _ in CASES])
def test_a_bad_count_is_a_usage_error_naming_the_value(argv, bad, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert argv[-1] in err and repr(bad) in err
    assert "integer" in err


def test_count_types_accept_their_lower_bound():
    from inspector.commands._args import non_negative_int, positive_int

    assert non_negative_int("0") == 0 and positive_int("3") == 3
