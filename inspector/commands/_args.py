"""argparse value types shared by the verbs: a bad count is a one-line usage error."""

from __future__ import annotations

import argparse

from inspector.errors import InspectorError


def _int(text: str, least: int, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if n < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return n


def positive_int(text: str) -> int:
    """``type=`` for counts that must be at least 1 (frames, parts, steps)."""
    return _int(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """``type=`` for counts where 0 means none (cloning samples ...)."""
    return _int(text, 0, "a non-negative integer")


def label_map(text: str | None) -> dict[str, str]:
    """``--label-map old:new[,old:new...]`` as a dict (empty when not given)."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        k, sep, v = part.partition(":")
        if not sep or not k.strip() or not v.strip():
            raise InspectorError(f"--label-map expects old:new[,old:new...], got {text!r}")
        out[k.strip()] = v.strip()
    return out


def fraction(text: str) -> float:
    """``type=`` for rates 0..1 (false-alarm ceilings, recall floors)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}")
    return v


def default_store_split(
    args: argparse.Namespace, verb: str, split: str, why: str, *, err: bool = False
) -> None:
    """Give ``--camera store`` without ``split=`` the split this verb is for.

    A store's ``train`` frames train, its ``val`` frames choose (checkpoints, operating
    points) and its ``heldout`` frames give the final figure; all frames at once would
    judge a model on what it was trained on. Prints what it chose.

    :param args: the verb's arguments (``camera``, ``param``: ``KEY=VALUE`` strings).
    :param verb: the verb's name, for the printed line.
    :param split: the split to use.
    :param why: what the split is for, for the printed line.
    :param err: print to stderr (a verb whose stdout is JSON).
    """
    import sys

    from inspector.camera import parse_params

    if getattr(args, "camera", None) != "store" or "split" in parse_params(args.param or []):
        return
    args.param = [*(args.param or []), f"split={split}"]
    print(
        f"{verb}: store without split=: using its {split} split ({why}); "
        "give --param split=... for another",
        file=sys.stderr if err else sys.stdout,
    )
