"""The command line. The only place that turns an InspectorError into exit status 2.

Each verb lives in ``inspector/commands/<verb>.py`` and exposes
``add_parser(subparsers)``; heavy libraries are imported inside the handlers so
that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from inspector.errors import InspectorError


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped.

    Messages quote what users and files supplied; a newline in a station id or a YAML
    key must not split the one error line (or forge a second one).

    :param text: the message.
    """
    text = text.strip()
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: Verb modules, in the order ``--help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "camera",
    "profile",
    "train",
    "calibrate",
    "export",
    "engine",
    "run",
    "footage",
    "retrain",
    "models",
    "demo",
    "health",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit 2 (its default status)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every verb."""
    parser = _Parser(
        prog="inspector",
        description="Industrial visual-inspection agent: scan, focus, classify.",
    )
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    sub = parser.add_subparsers(dest="command", metavar="VERB", parser_class=_Parser)
    sub.required = True
    for name in COMMAND_MODULES:
        mod = importlib.import_module(f"inspector.commands.{name}")
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit status."""
    from inspector.threads import preset_environment

    preset_environment(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    level = getattr(logging, str(args.log_level).upper(), logging.WARNING)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if isinstance(level, int) and level <= logging.WARNING:
        # Progress lines (when no bar is drawn) show at the default level.
        logging.getLogger("inspector.progress").setLevel(min(level, logging.INFO))
    try:
        libraries = getattr(args, "thread_libraries", None)
        if libraries:  # before the verb imports torch, numpy's BLAS users, ONNX Runtime
            from inspector.threads import configure

            configure(getattr(args, "threads", None), torch=libraries == "torch")
        rc = args.func(args)
    except InspectorError as exc:
        print(f"inspector: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("inspector: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


def console_main() -> None:
    """Entry point of the ``inspector`` console script."""
    sys.exit(main(sys.argv[1:]))
