"""argparse value types shared by the verbs: a bad count is a one-line usage error."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from inspector.errors import InspectorError


def deprecated(old: str, new: str) -> None:
    """Say on stderr that ``old`` still works but ``new`` is the spelling to write."""
    print(f"inspector: note: {old} is deprecated; write {new}", file=sys.stderr)


class DeprecatedAlias(argparse.Action):
    """An old flag that stores into the new one's ``dest`` and says so on stderr.

    :param instead: the spelling to write now (``--camera NAME``).
    """

    def __init__(self, option_strings: Sequence[str], dest: str, instead: str, **kw: Any):
        super().__init__(option_strings, dest, **kw)
        self.instead = instead

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        deprecated(f"{option_string} {values}", self.instead.replace("NAME", str(values)))
        setattr(namespace, self.dest, values)


class RepeatedParam(argparse.Action):
    """``--param KEY=VALUE``, once per flag (as every verb spells it); the older
    ``--param a=1 b=2`` of ``camera probe`` still works, with a note on stderr."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        values = list(values)
        if len(values) > 1:
            deprecated(
                f"{option_string} {' '.join(values)}",
                " ".join(f"{option_string} {v}" for v in values) + " (one per flag)",
            )
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *values])


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


def add_threads_argument(p: argparse.ArgumentParser, libraries: str = "torch") -> None:
    """``--threads N``: the thread count of every library's pool (see :mod:`inspector.threads`).

    :param libraries: ``torch`` for verbs that train or evaluate in torch; ``onnx`` for
        those that run exported graphs only (the station: torch is not imported for it).
    """
    p.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        help="threads of torch, OpenMP, OpenCV and ONNX Runtime (default: $INSPECTOR_THREADS, "
        "else $OMP_NUM_THREADS, else the cores this process may use)",
    )
    p.set_defaults(thread_libraries=libraries)


def add_progress_argument(p: argparse.ArgumentParser) -> None:
    """``--no-progress``: no bar, a progress line every 30 s (:mod:`inspector.train.watch`)."""
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar: a progress line every 30 s instead (also when stderr is not a "
        "terminal)",
    )


def fraction(text: str) -> float:
    """``type=`` for rates 0..1 (false-alarm ceilings, recall floors)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction 0..1, got {text!r}")
    return v


#: ``--confidence none``: hold the target to the rate the parts show (no margin).
NO_CONFIDENCE = "none"


def confidence(text: str) -> float | str:
    """``type=`` for ``--confidence``: strictly between 0 and 1 (0.9: nine times in ten),
    or ``none`` (:data:`NO_CONFIDENCE`: the rate the parts show)."""
    if text.strip().lower() == NO_CONFIDENCE:
        return NO_CONFIDENCE
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a confidence like 0.8, or none, got {text!r}"
        ) from None
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(
            f"expected a confidence strictly between 0 and 1 (e.g. 0.8), or none, got {text!r}"
        )
    return v


def search_depth(text: str) -> str | int:
    """``type=`` for ``--search-depth``: ``auto``, ``full`` or a zoom level (0, 1, ...)."""
    if text in ("auto", "full"):
        return text
    try:
        return _int(text, 0, "--search-depth")
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected auto, full or a zoom level (0, 1, ...), got {text!r}"
        ) from None


def add_search_depth_argument(
    p: argparse.ArgumentParser, default: str | None, trains: bool = False
) -> None:
    """``--search-depth``: chosen with the operating point (calibrate, train; ``trains``:
    full or a level is also the depth training's rollouts run at)."""
    p.add_argument(
        "--search-depth",
        type=search_depth,
        default=default,
        metavar="auto|full|LEVEL",
        help="how deep the search may zoom, chosen with the operating point: auto (each "
        "zoom level from the deepest up; a shallower one only where it meets the objective "
        "strictly better on these parts: the agent then declares rather than look deeper), "
        "full (every level, as trained) or a level (0 = overview)"
        + (f"; default {default}" if default else "; default: the recipe's (presets: auto)")
        + (
            ". full or a level is also the depth training runs at (the footage preset "
            "trains one level above native; full trains every level)"
            if trains
            else ""
        ),
    )


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
