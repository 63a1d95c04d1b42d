"""argparse value types shared by the verbs: a bad count is a one-line usage error."""

from __future__ import annotations

import argparse


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


def fraction(text: str) -> float:
    """``type=`` for rates 0..1 (false-alarm ceilings, recall floors)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}")
    return v
