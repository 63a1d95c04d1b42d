"""``inspector models list``: the versions in a model registry."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``models`` verb.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser("models", help="list the model registry's versions")
    sub = p.add_subparsers(dest="models_command", metavar="SUBVERB")
    sub.required = True
    lst = sub.add_parser(
        "list",
        help="versions with their metrics, profile and footage hashes and ONNX file",
        description="List the registry's versions, oldest first.",
    )
    lst.add_argument(
        "--registry", type=Path, default=Path("registry"), help="registry folder (./registry)"
    )
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=cmd_list)
    return p


def cmd_list(args: argparse.Namespace) -> int:
    """Print one line per version (or JSON)."""
    from inspector.footage.registry import MODEL_FILE, list_versions

    versions = list_versions(args.registry)
    if args.json:
        print(json.dumps(versions, indent=2))
        return 0
    if not versions:
        print(f"registry {args.registry}: no versions")
        return 0
    print(f"registry {args.registry}: {len(versions)} version(s)")
    for v in versions:
        m = v.get("metrics") or {}
        print(
            f"v{v['version']:04d}  {v.get('created_at', '')}  "
            f"recall {_f(m.get('defect_recall'))}  false alarms {_f(m.get('false_alarm_rate'))}  "
            f"balanced {_f(m.get('balanced_accuracy'))}  "
            f"profile {v.get('profile_sha256', '')[:12]}  "
            f"footage {v.get('footage_manifest_sha256', '')[:12]}  {Path(v['path']) / MODEL_FILE}"
        )
    return 0


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"
