"""``inspector profile``: check reward profiles, print their JSON Schema, explain rewards."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from inspector.commands._args import positive_int


def add_parser(subparsers: Any) -> None:
    """Add the ``profile`` verb with ``check``, ``schema``, ``explain``, ``fit`` and ``pairs``.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser(
        "profile",
        help="check reward profiles, print their JSON Schema, explain rewards",
        description="Reward profiles (YAML): validate, print the JSON Schema, explain.",
    )
    sub = p.add_subparsers(dest="profile_command", metavar="SUBVERB")
    sub.required = True

    check = sub.add_parser(
        "check",
        help="validate profiles (exit 0 when all are valid, else 2)",
        description="Validate each FILE; print 'ok FILE' or the error (file:line:col: ...).",
    )
    check.add_argument(
        "files", nargs="+", metavar="FILE", help="profile YAML files ('-' reads standard input)"
    )
    check.add_argument(
        "--strict", action="store_true", help="treat warnings (suspicious settings) as errors"
    )
    check.set_defaults(func=_check)

    schema = sub.add_parser(
        "schema",
        help="print the JSON Schema of profiles (for editors)",
        description="Print the JSON Schema (draft 2020-12) of reward profiles, with the "
        "reward terms of every installed plugin.",
    )
    schema.add_argument("--out", metavar="FILE", help="write the schema to FILE instead")
    schema.set_defaults(func=_schema)

    explain = sub.add_parser(
        "explain",
        help="run scripted episodes and show per-step, per-term rewards",
        description="Run N episodes with a scripted scanning policy (or --model) and show "
        "each term's raw, redistributed and shaped reward per step.",
    )
    explain.add_argument("file", metavar="FILE", help="profile YAML file")
    explain.add_argument("--camera", default="synthetic", help="camera driver (default synthetic)")
    explain.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="camera driver parameter (repeatable)",
    )
    explain.add_argument(
        "--episodes", type=positive_int, default=3, help="episodes to run (default 3)"
    )
    explain.add_argument("--json", metavar="OUT", help="write all traces as JSON")
    explain.add_argument("--plot", metavar="OUT.png", help="draw one episode's rewards and path")
    explain.add_argument("--model", metavar="MODEL", help="use a trained model, not the script")
    explain.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    explain.set_defaults(func=_explain)
    _add_fit(sub)
    _add_pairs(sub)


def _add_fit(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="fit term values to people's preferences between inspections",
        description="Fit the profile's term values to judged pairs of inspections "
        "(Bradley-Terry; signs kept, pinned terms and bounds respected, a penalty toward "
        "the current values). Writes a new profile version with its provenance and prints "
        "what changed.",
    )
    fit.add_argument("file", metavar="PROFILE", help="the profile YAML to start from")
    fit.add_argument(
        "--preferences", required=True, metavar="PREFS.jsonl", help="judged pairs (JSON Lines)"
    )
    fit.add_argument("--out", required=True, metavar="NEW.yaml", help="the new profile")
    fit.add_argument(
        "--pin", action="append", default=[], metavar="TERM", help="keep TERM's value (repeatable)"
    )
    fit.add_argument(
        "--bound",
        action="append",
        default=[],
        metavar="TERM=LO:HI",
        help="keep TERM's value(s) within [LO, HI]; either side may be empty (repeatable)",
    )
    fit.add_argument(
        "--penalty",
        type=float,
        default=None,
        help="weight of the pull toward the current values (default 0.1)",
    )
    fit.add_argument(
        "--lapse",
        type=float,
        default=None,
        help="share of choices assumed made at random (default 0.1)",
    )
    fit.add_argument(
        "--holdout",
        type=float,
        default=0.2,
        help="share of preferences held out to measure agreement (default 0.2)",
    )
    fit.add_argument("--seed", type=int, default=0, help="seed of the held-out split")
    fit.set_defaults(func=_fit)


def _add_pairs(sub: Any) -> None:
    pairs = sub.add_parser(
        "pairs",
        help="show two inspections of a part and record which is better",
        description="Record two inspections of the same part, draw both glimpse paths into "
        "an image, read the answer (a, b, tie, skip, quit) as a line from standard input and "
        "append the judged pair to the preferences file.",
    )
    pairs.add_argument("file", metavar="PROFILE", help="profile YAML file")
    pairs.add_argument("--out", required=True, metavar="PREFS.jsonl", help="preferences file")
    pairs.add_argument(
        "--images", metavar="DIR", help="where the pair images go (default: next to --out)"
    )
    pairs.add_argument("--count", type=positive_int, default=10, help="pairs to show (default 10)")
    pairs.add_argument("--camera", default="synthetic", help="camera driver (default synthetic)")
    pairs.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="camera driver parameter"
    )
    pairs.add_argument("--model", metavar="MODEL", help="one side is this exported model's path")
    pairs.add_argument("--judge", default="", help="who judges (recorded with each choice)")
    pairs.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    pairs.set_defaults(func=_pairs)


def _check(args: argparse.Namespace) -> int:
    from inspector.errors import InspectorError, ProfileError
    from inspector.profile import check_profile, load_profile_text

    bad = 0
    for f in args.files:
        try:
            if f == "-":
                found = list(
                    load_profile_text(sys.stdin.buffer.read(), "<stdin>", warn=False).warnings
                )
            else:
                found = check_profile(f)
        except ProfileError as exc:
            print(str(exc), file=sys.stderr)
            bad += 1
            continue
        except InspectorError as exc:  # e.g. a plugin that fails to load
            print(f"{f}: {exc}", file=sys.stderr)
            bad += 1
            continue
        for w in found:
            print(f"{f}: warning: {w}", file=sys.stderr)
        if found and args.strict:
            bad += 1
            continue
        print(f"ok {f}")
    return 2 if bad else 0


def _schema(args: argparse.Namespace) -> int:
    from inspector.errors import InspectorError
    from inspector.profile import profile_schema

    text = json.dumps(profile_schema(), indent=2) + "\n"
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise InspectorError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    else:
        sys.stdout.write(text)
    return 0


def _fit(args: argparse.Namespace) -> int:
    from inspector.rrm.preferences import DEFAULT_LAPSE, DEFAULT_PENALTY
    from inspector.workflows.preferences import run_fit

    if args.penalty is None:
        args.penalty = DEFAULT_PENALTY
    if args.lapse is None:
        args.lapse = DEFAULT_LAPSE
    return run_fit(args)


def _pairs(args: argparse.Namespace) -> int:
    from inspector.workflows.preferences import run_pairs

    return run_pairs(args)


def _explain(args: argparse.Namespace) -> int:
    from inspector.workflows.explain import run_explain

    return run_explain(args)
