"""``inspector models``: the model registry's versions and each line's roll-out.

``list`` shows the versions, ``add`` registers an exported model (and its profile),
``promote`` puts a version on a line's channel (stable, canary with a share, shadow),
``rollback`` undoes a roll-out, ``channels`` shows a line's state and its log,
``compare`` reads live against shadow verdicts from a station's footage.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _registry_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--registry", type=Path, default=Path("registry"), help="registry folder (./registry)"
    )


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``models`` verb.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser(
        "models", help="the model registry: versions, and which one each line runs"
    )
    sub = p.add_subparsers(dest="models_command", metavar="SUBVERB")
    sub.required = True
    lst = sub.add_parser(
        "list",
        help="versions with their metrics, profile and footage hashes and ONNX file",
        description="List the registry's versions, oldest first.",
    )
    _registry_arg(lst)
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=cmd_list)

    add = sub.add_parser(
        "add",
        help="register an exported model (and the profile it was trained with)",
        description="Copy MODEL.onnx (and --profile) into a new registry version.",
    )
    _registry_arg(add)
    add.add_argument("model", metavar="MODEL.onnx", help="the exported model")
    add.add_argument("--profile", help="the reward profile it was trained with")
    add.add_argument("--notes", default="", help="free text")
    add.set_defaults(func=cmd_add)

    promote = sub.add_parser(
        "promote",
        help="put a version on a line's channel (logged)",
        description="Put VERSION on --line's channel: stable, canary (with --share 5, 20, 75 "
        "or 100 %% of the line's stations) or shadow. Stations follow on their next part.",
    )
    _registry_arg(promote)
    promote.add_argument("version", metavar="VERSION", help="a registered version (3 or v0003)")
    promote.add_argument("--line", required=True, help="the line")
    promote.add_argument("--to", required=True, choices=("stable", "canary", "shadow"))
    promote.add_argument("--share", type=int, help="the canary's share in %% (5, 20, 75, 100)")
    promote.add_argument("--by", default="", help="who (default $USER)")
    promote.add_argument("--note", default="", help="why")
    promote.set_defaults(func=cmd_promote)

    rollback = sub.add_parser(
        "rollback",
        help="undo a roll-out on a line (logged)",
        description="canary (default): end the canary, every station runs stable. stable: "
        "back to the stable version before the last promotion, and no canary. shadow: clear "
        "it. Stations follow on their next part.",
    )
    _registry_arg(rollback)
    rollback.add_argument("--line", required=True, help="the line")
    rollback.add_argument(
        "--channel", default="canary", choices=("canary", "stable", "shadow"), help="(canary)"
    )
    rollback.add_argument("--by", default="", help="who (default $USER)")
    rollback.add_argument("--note", default="", help="why")
    rollback.set_defaults(func=cmd_rollback)

    chan = sub.add_parser(
        "channels",
        help="a line's channels and their log",
        description="Show what --line runs on each channel, and every change.",
    )
    _registry_arg(chan)
    chan.add_argument("--line", required=True, help="the line")
    chan.add_argument("--json", action="store_true", help="print JSON")
    chan.set_defaults(func=cmd_channels)

    _add_compare(sub)
    return p


def _add_compare(sub: argparse._SubParsersAction) -> None:
    """``models compare``: live against shadow from a footage store."""
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
    cmp_.add_argument(
        "--gate",
        action="store_true",
        help="apply retrain's promotion gate to the line's evidence: exit 0 when the shadow "
        "may replace the live model, 1 when not (with the reasons)",
    )
    cmp_.add_argument("--min-parts", type=int, default=50,
                      help="labelled parts with both verdicts the gate needs (50)")  # fmt: skip
    cmp_.add_argument("--min-recall-delta", type=float, default=0.0,
                      help="shadow recall - live recall at least (0)")  # fmt: skip
    cmp_.add_argument("--max-false-alarm-delta", type=float, default=0.0,
                      help="shadow false-alarm rate - live at most (0)")  # fmt: skip
    cmp_.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    """Print the live/shadow comparison of a footage store."""
    from inspector.footage.shadow_compare import compare_shadow
    from inspector.footage.store import FootageStore

    with FootageStore(args.footage) as store:
        c = compare_shadow(store.iter_records(), args.ok_class).to_dict()
    if args.gate:
        c["gate"] = shadow_gate(c, args)
    if args.json:
        print(json.dumps(c, indent=2))
        return 0 if not args.gate or c["gate"]["passed"] else 1
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
    if not args.gate:
        return 0
    g = c["gate"]
    print(f"gate: {'PASSED' if g['passed'] else 'REFUSED'}: " + "; ".join(g["reasons"]))
    return 0 if g["passed"] else 1


def shadow_gate(c: dict, args: argparse.Namespace) -> dict:
    """retrain's promotion gate on the line's evidence: the shadow against the live model.

    :param c: :func:`compare_shadow`'s figures.
    """
    from inspector.workflows.retrain import Gate

    gate = Gate(args.min_recall_delta, args.max_false_alarm_delta)
    parts = c["live"]["parts"]
    if parts < args.min_parts:
        passed, reasons = (
            False,
            [
                f"{parts} labelled parts with both verdicts, the gate needs {args.min_parts} "
                "(label line parts by import or in the console)"
            ],
        )
    else:
        passed, reasons = gate.check(c["live"], c["shadow"])
    return {"passed": passed, "reasons": reasons, "parts": parts,
            "min_recall_delta": gate.min_recall_delta,
            "max_false_alarm_delta": gate.max_false_alarm_delta}  # fmt: skip


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
            f"profile {(v.get('profile_sha256') or '')[:12]}  "
            f"footage {(v.get('footage_manifest_sha256') or '')[:12]}  "
            f"{Path(v['path']) / MODEL_FILE}"
        )
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Register a model by hand."""
    from inspector.errors import InspectorError
    from inspector.footage.registry import register

    sha = ""
    if args.profile:
        from inspector.profile import load_profile

        sha = load_profile(args.profile, warn=False).sha256
    if not Path(args.model).is_file():
        raise InspectorError(f"model not found: {args.model}")
    doc = register(
        args.registry,
        args.model,
        metrics={},
        profile_sha256=sha,
        footage_manifest=None,
        notes=args.notes,
        profile=args.profile,
    )
    print(f"registered v{doc['version']:04d} in {args.registry}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    """Promote a version on a line's channel."""
    from inspector.footage.channels import promote
    from inspector.footage.registry import parse_version

    state = promote(
        args.registry,
        args.line,
        parse_version(args.version),
        args.to,
        args.share,
        by=args.by,
        note=args.note,
    )
    print(_state_line(state))
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    """Roll back a line's channel."""
    from inspector.footage.channels import rollback

    state = rollback(args.registry, args.line, args.channel, by=args.by, note=args.note)
    print(_state_line(state))
    return 0


def cmd_channels(args: argparse.Namespace) -> int:
    """Show a line's channels and log."""
    from inspector.footage.channels import history, read_state

    state = read_state(args.registry, args.line)
    log = history(args.registry, args.line)
    if args.json:
        print(json.dumps({"state": state, "log": log}, indent=2))
        return 0
    print(_state_line(state))
    for e in log:
        a, b = e.get("before") or {}, e.get("after") or {}
        print(
            f"  {e.get('at', '')}  r{e.get('revision', '?')}  {e.get('action', '')}  "
            f"by {e.get('by') or '?'}: {_channels(b)} (was {_channels(a)})"
            + (f"  # {e['note']}" if e.get("note") else "")
        )
    return 0


def _v(n: int | None) -> str:
    return "-" if n is None else f"v{n:04d}"


def _channels(s: dict) -> str:
    canary = f"{_v(s.get('canary'))} at {s.get('share', 0)} %" if s.get("canary") else "-"
    return f"stable {_v(s.get('stable'))}, canary {canary}, shadow {_v(s.get('shadow'))}"


def _state_line(state: dict) -> str:
    return f"line {state['line']} (revision {state['revision']}): {_channels(state)}"


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"
