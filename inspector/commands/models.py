"""``inspector models list`` (the registry's versions) and ``models compare`` (live vs shadow)."""

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
    cmp_ = sub.add_parser(
        "compare",
        help="live model against its shadow, from the station's footage",
        description=(
            "Read the results a station recorded in a footage store (with the shadow "
            "model's decisions, StationConfig 'shadow:') and report how often the two "
            "models agree and, on parts labelled by import or by an operator, each "
            "model's defect recall, false alarms and accuracy."
        ),
    )
    cmp_.add_argument("--footage", type=Path, required=True, help="the station's footage store")
    cmp_.add_argument("--ok-class", default="ok", help="the class that means ok (default: ok)")
    cmp_.add_argument("--json", action="store_true", help="print JSON")
    cmp_.set_defaults(func=cmd_compare)
    return p


def cmd_compare(args: argparse.Namespace) -> int:
    """Print the live/shadow comparison of a footage store."""
    from inspector.footage.shadow_compare import compare_shadow
    from inspector.footage.store import FootageStore

    with FootageStore(args.footage) as store:
        c = compare_shadow(store.iter_records(), args.ok_class).to_dict()
    if args.json:
        print(json.dumps(c, indent=2))
        return 0
    print(
        f"footage {args.footage}: {c['results']} results, {c['with_shadow']} with a shadow "
        f"verdict ({', '.join(f'{k} {v}' for k, v in c['skipped'].items()) or 'none skipped'})"
    )
    if not c["with_shadow"]:
        print("no shadow verdicts: run the station with 'shadow: MODEL' first")
        return 0
    print(f"agreement: class {_f(c['label_agreement'])}, ok/defect {_f(c['verdict_agreement'])}")
    for name in ("live", "shadow"):
        m = c[name]
        print(
            f"{name:6s} on {m['parts']} labelled parts: accuracy {_f(m['accuracy'])}  "
            f"defect recall {_f(m['defect_recall'])} ({m['defects']} defective)  "
            f"false alarms {_f(m['false_alarm_rate'])} ({m['oks']} ok)"
        )
    return 0


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
