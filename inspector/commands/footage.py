"""``inspector footage``: import, review, label and list a footage store.

``footage import SRC --format FORMAT --store DIR`` adds frames (idempotent);
``footage review --store DIR`` lists frames that need a person and writes a
contact sheet per batch (``--select uncertain --model M --n 50``: the frames the
model is least sure of); ``footage label --store DIR --csv FILE`` applies
``frame_id,label`` corrections; ``footage list --store DIR`` prints counts;
``footage export --format label-studio`` writes Label Studio tasks with the model's
verdicts and glimpses as pre-annotations, and ``footage import --format label-studio``
reads Label Studio's export back.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from inspector.commands._args import label_map, positive_int
from inspector.errors import InspectorError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``footage`` verb and its sub-verbs.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser(
        "footage",
        help="import, review, label and list collected footage",
        description="Manage a footage store: import, review, label, list frames.",
    )
    sub = p.add_subparsers(dest="footage_command", metavar="SUBVERB")
    sub.required = True
    _add_import(sub)
    _add_review(sub)
    _add_label(sub)
    _add_export(sub)
    lst = sub.add_parser("list", help="counts by split, label and label source")
    lst.add_argument("--store", required=True, type=Path, help="the store folder")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=cmd_list)
    _add_frames(sub)
    return p


def _add_import(sub: argparse._SubParsersAction) -> None:
    from inspector.annotations import DEFAULT_LABEL_RULE, LABEL_RULES
    from inspector.footage.importers import FORMATS

    imp = sub.add_parser(
        "import",
        help="add footage to a store (a re-import adds nothing)",
        description=(
            "Import footage into a store. Each frame is kept once (content hash); corrupt or "
            "unmatched files are reported and skipped."
        ),
    )
    imp.add_argument("src", type=Path, help="folder, manifest CSV or annotation file")
    imp.add_argument(
        "--format",
        required=True,
        choices=(*FORMATS, "label-studio"),
        help="layout of SRC (label-studio: Label Studio's JSON export, labels for frames "
        "already in the store)",
    )
    imp.add_argument("--store", required=True, type=Path, help="the store folder (created)")
    imp.add_argument("--label", help="label of every image (--format masks)")
    imp.add_argument("--manifest", type=Path, help="CSV with labels for --format masks")
    imp.add_argument("--split", help="import only manifest rows of this split (--format csv)")
    imp.add_argument("--images", type=Path, help="folder the images are in, when not beside")
    imp.add_argument("--label-map", help="rename labels, old:new[,old:new...]")
    imp.add_argument(
        "--label-rule",
        choices=LABEL_RULES,
        default=DEFAULT_LABEL_RULE,
        help="voc/coco: how a frame's label is chosen from its annotation: largest-area "
        "(the class with the most box area; default), first-object (the first box's "
        "class), folder (the image's folder name), filename-pattern (--label-pattern "
        "on the image's file name); frames without boxes are 'ok' under the first two",
    )
    imp.add_argument(
        "--label-pattern",
        help="--label-rule filename-pattern: a regular expression whose first group (or "
        "group 'label') is the class, searched in the file name without its extension "
        r"(default '^(.*?)[-_. ]*\d+$': 'crazing_12' -> crazing)",
    )
    imp.add_argument(
        "--heldout-percent",
        type=float,
        default=20.0,
        help="share held out by hash when the store is new (default 20; fixed afterwards)",
    )
    imp.add_argument(
        "--val-percent",
        type=float,
        default=10.0,
        help="share in the val split (by hash, for checkpoints and calibration) when the "
        "store is new (default 10; fixed afterwards)",
    )
    imp.add_argument(
        "--max-pixels",
        type=positive_int,
        help="refuse images whose header states more pixels than this (default 100,000,000 "
        "or INSPECTOR_MAX_IMAGE_PIXELS); checked before anything is decoded",
    )
    imp.add_argument("--json", type=Path, help="write the import report as JSON here")
    imp.add_argument("--no-progress", action="store_true", help="no progress bar")
    imp.set_defaults(func=cmd_import)


def _add_review(sub: argparse._SubParsersAction) -> None:
    rev = sub.add_parser(
        "review",
        help="list frames that need a person; write contact sheets",
        description=(
            "List the frames that need a person (unlabelled, low confidence, station verdict "
            "and label disagree) or, with --select uncertain --model M, the frames the model is "
            "least sure of. Writes a contact sheet PNG and a frame_id,label CSV per batch."
        ),
    )
    rev.add_argument("--store", required=True, type=Path, help="the store folder")
    rev.add_argument("--model", help="model for --select uncertain (run dir, .zip or .onnx)")
    rev.add_argument(
        "--select",
        choices=("review", "uncertain", "feedback"),
        default="review",
        help="review: frames needing a person (default); uncertain: active learning; "
        "feedback: what operators confirmed or corrected (console, Label Studio), newest first",
    )
    rev.add_argument("--station", help="--select feedback: only this station's")
    rev.add_argument("--n", type=positive_int, default=50, help="frames to list (default 50)")
    rev.add_argument("--batch", type=positive_int, default=25, help="frames per sheet (default 25)")
    rev.add_argument(
        "--low-confidence",
        type=float,
        default=0.6,
        help="station frames below this confidence need review (default 0.6)",
    )
    rev.add_argument("--sheet-dir", type=Path, help="where the sheets go (default STORE/review)")
    rev.set_defaults(func=cmd_review)


def _add_label(sub: argparse._SubParsersAction) -> None:
    lab = sub.add_parser(
        "label",
        help="apply an operator's frame_id,label CSV",
        description=(
            "Apply label corrections from a CSV with columns frame_id,label (a header line is "
            "optional; a frame id may be a unique prefix of 8+ characters). Unknown frames and "
            "bad rows are reported with their line numbers; exit 1 when any row was rejected."
        ),
    )
    lab.add_argument("--store", required=True, type=Path, help="the store folder")
    lab.add_argument("--csv", required=True, type=Path, help="the corrections")
    lab.set_defaults(func=cmd_label)


def _add_export(sub: argparse._SubParsersAction) -> None:
    exp = sub.add_parser(
        "export",
        help="write store frames as Label Studio tasks with pre-annotations",
        description=(
            "Write Label Studio tasks (JSON) for the store's frames: the model's class and its "
            "glimpses as pre-annotations (predictions), the frame served by Label Studio's "
            "local-files storage from the store folder, and the matching labelling config "
            "(OUT's name + .label-config.xml). Import the annotated export back with "
            "'footage import EXPORT.json --format label-studio'."
        ),
    )
    exp.add_argument("--format", required=True, choices=("label-studio",), help="task format")
    exp.add_argument("--store", required=True, type=Path, help="the store folder")
    exp.add_argument("--out", required=True, type=Path, help="the tasks JSON to write")
    exp.add_argument(
        "--model", help="the station's model (.onnx, run dir): its scan settings size the boxes"
    )
    exp.add_argument(
        "--select",
        choices=("all", "review", "station"),
        default="all",
        help="all frames (default), those needing review, or station frames only",
    )
    exp.add_argument("--n", type=positive_int, help="at most this many tasks")
    exp.add_argument(
        "--image-prefix",
        default="/data/local-files/?d=",
        help="put before each frame's path in data.image (default: Label Studio local files)",
    )
    exp.set_defaults(func=cmd_export)


def _add_frames(sub: argparse._SubParsersAction) -> None:
    from inspector.footage.store import SPLITS

    fr = sub.add_parser(
        "frames",
        help="list frames one per line: id, split, label, label source, source file",
        description=(
            "List a store's frames in frame-id order, one per line: frame id, split, label, "
            "where the label came from, and the file and format it was imported from. "
            "Filters combine."
        ),
    )
    fr.add_argument("store", type=Path, help="the store folder")
    fr.add_argument("--split", choices=SPLITS, help="only this split")
    fr.add_argument("--label", help="only this label ('-': unlabelled frames)")
    fr.add_argument(
        "--source", metavar="GLOB", help="only frames whose source file matches (e.g. '*crazing*')"
    )
    fr.add_argument("--limit", type=positive_int, help="at most this many")
    fr.add_argument("--json", action="store_true", help="one JSON object per line")
    fr.set_defaults(func=cmd_frames)


def cmd_import(args: argparse.Namespace) -> int:
    """``footage import``."""
    from inspector.annotations import LabelRule
    from inspector.footage.importers import import_footage
    from inspector.footage.store import FootageStore

    if not 0.0 <= args.heldout_percent <= 100.0:
        raise InspectorError(f"--heldout-percent must be 0..100, got {args.heldout_percent}")
    if not 0.0 <= args.val_percent <= 100.0 - args.heldout_percent:
        raise InspectorError(
            f"--val-percent must be 0..{100.0 - args.heldout_percent:g} (with "
            f"--heldout-percent {args.heldout_percent:g}), got {args.val_percent}"
        )
    threshold = round(256 * args.heldout_percent / 100.0)
    val_width = min(round(256 * args.val_percent / 100.0), 256 - threshold)
    if args.format == "label-studio":
        from inspector.footage.labelstudio import import_annotations

        with FootageStore(args.store) as store:
            report = import_annotations(store, args.src)
            total = len(store)
        for f, why in report.skipped[:50]:
            print(f"skipped {f}: {why}")
        print(
            f"import label-studio {args.src}: {report.updated} labels changed, "
            f"{report.present} unchanged, {len(report.skipped)} skipped; store holds {total} "
            "frames"
        )
        if args.json:
            args.json.write_text(json.dumps(report.to_dict(), indent=2))
        return 0
    if args.label_pattern is not None and args.label_rule != "filename-pattern":
        raise InspectorError("--label-pattern is for --label-rule filename-pattern")
    rule = LabelRule(args.label_rule, args.label_pattern)
    if args.format in ("voc", "coco"):
        print(f"import {args.format}: frame labels by {rule.describe()}")
    store_args = {"create": True, "heldout_threshold": threshold, "val_width": val_width}
    with FootageStore(args.store, **store_args) as store:
        report = import_footage(
            store,
            args.src,
            args.format,
            label=args.label,
            manifest=args.manifest,
            split=args.split,
            images_root=args.images,
            label_map=label_map(args.label_map),
            progress=not args.no_progress,
            max_pixels=args.max_pixels,
            label_rule=rule,
        )
        total = len(store)
    for f, why in report.skipped[:50]:
        print(f"skipped {f}: {why}")
    if len(report.skipped) > 50:
        print(f"... and {len(report.skipped) - 50} more skipped (see --json)")
    for f, why in report.mixed[:20]:
        print(f"boxes disagree {f}: {why}")
    if len(report.mixed) > 20:
        print(f"... and {len(report.mixed) - 20} more frames whose boxes disagree (see --json)")
    print(f"import {args.format} {args.src}: {report.line()}; store holds {total} frames")
    if args.json:
        args.json.write_text(json.dumps(report.to_dict(), indent=2))
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    """``footage review``."""
    from inspector.commands.camera import write_sheet
    from inspector.footage.store import FootageStore, source_kind

    if args.select == "feedback":
        return _review_feedback(args)
    with FootageStore(args.store) as store:
        if args.select == "uncertain":
            if not args.model:
                raise InspectorError("--select uncertain needs --model (the current model)")
            from inspector.train.torch_policy import load_any_policy
            from inspector.workflows.heldout import select_uncertain

            policy = load_any_policy(args.model)
            cands = [r for r in store.iter_records() if source_kind(r.label_source) != "operator"]
            picked = [
                (rec, f"uncertain: entropy {h:.3f}, max p {p:.2f}, says {v}")
                for rec, h, p, v in select_uncertain(policy, store, cands, args.n)
            ]
            print(
                f"{len(picked)} most uncertain of {len(cands)} frames not labelled by an operator"
            )
        else:
            listed = store.needs_review(low_confidence=args.low_confidence)
            picked = listed[: args.n]
            print(
                f"{len(listed)} frames need review"
                + (f"; showing {args.n}" if len(listed) > args.n else "")
            )
        for rec, why in picked:
            print(f"{rec.frame_id}  {rec.label or '-':<12} {rec.label_source or '-':<16} {why}")
        if not picked:
            return 0
        sheet_dir = args.sheet_dir or (args.store / "review")
        for b in range(0, len(picked), args.batch):
            batch = picked[b : b + args.batch]
            frames = []
            for rec, why in batch:
                fr = store.frame(rec)
                # The sheet shows the short id (what an operator types back) and the reason.
                fr.part_id = f"{rec.frame_id[:12]} {why.split(' (')[0]}"
                frames.append(fr)
            k = b // args.batch + 1
            png = write_sheet(sheet_dir / f"review_{k:03d}.png", frames)
            with open(sheet_dir / f"review_{k:03d}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["frame_id", "label"])
                for rec, _ in batch:
                    w.writerow([rec.frame_id, rec.label or ""])
            print(f"sheet: {png}")
    return 0


def _review_feedback(args: argparse.Namespace) -> int:
    """``footage review --select feedback``: operators' confirmations and corrections."""
    from datetime import datetime, timezone

    from inspector.footage.feedback import feedback_counts, list_feedback
    from inspector.footage.store import FootageStore

    with FootageStore(args.store) as store:
        rows = list_feedback(store, station=args.station, limit=args.n)
        counts = feedback_counts(store, station=args.station)
    print(
        f"{counts['feedback']} parts with operator feedback: {counts['confirmed']} confirmed, "
        f"{counts['corrected']} corrected ({counts['false_alarms']} false alarms, "
        f"{counts['misses']} misses); newest {len(rows)}:"
    )
    for fb in rows:
        when = datetime.fromtimestamp(fb.at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        said = f"{fb.station_label or '-'} -> {fb.label}"
        print(
            f"{fb.frame_id[:12]}  {when}  operator:{fb.operator:<12} {fb.action:<8} "
            f"{said:<20} {fb.outcome or '':<11} {fb.station or '-'} model "
            f"{(fb.model_sha256 or '-')[:12]} via {fb.via}"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``footage export``."""
    from inspector.footage.labelstudio import export_tasks
    from inspector.footage.store import FootageStore

    scan, classes = None, []
    if args.model:
        from inspector.train.torch_policy import load_any_policy

        policy = load_any_policy(args.model)
        scan, classes = dict(policy.meta.scan), list(policy.meta.classes)
        policy.close()
    with FootageStore(args.store) as store:
        if args.select == "review":
            recs = [r for r, _ in store.needs_review()]
        else:
            recs = store.records()
            if args.select == "station":
                recs = [r for r in recs if r.result is not None]
        if args.n:
            recs = recs[: args.n]
        if not classes:
            found = {r.label for r in store.records() if r.label}
            for r in recs:
                found.update((r.result or {}).get("probabilities") or {})
            classes = sorted(found)
        out, cfg, n = export_tasks(store, recs, args.out, scan=scan, classes=classes,
                                   image_prefix=args.image_prefix)  # fmt: skip
    print(f"export label-studio: {n} tasks -> {out}; labelling config -> {cfg}")
    if scan is None:
        print("export label-studio: no --model, so the glimpse boxes are left out")
    print(
        f"serve the frames with LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true "
        f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={Path(args.store).resolve()}"
    )
    return 0


def cmd_label(args: argparse.Namespace) -> int:
    """``footage label``."""
    from inspector.footage.corrections import read_label_csv
    from inspector.footage.store import FootageStore

    rows, bad = read_label_csv(args.csv)
    applied = unchanged = 0
    unknown = []
    with FootageStore(args.store) as store:
        for n, ident, label in rows:
            fid = store.resolve(ident)
            if fid is None:
                unknown.append(f"{args.csv}:{n}: unknown frame id {ident!r}")
                continue
            if store.set_label(fid, label, "operator", commit=False):
                applied += 1
            else:
                unchanged += 1
        store.commit()
    for msg in bad + unknown:
        print(msg)
    print(
        f"labels: {applied} applied, {unchanged} unchanged, {len(unknown)} unknown frame ids, "
        f"{len(bad)} bad rows"
    )
    return 1 if bad or unknown else 0


def cmd_list(args: argparse.Namespace) -> int:
    """``footage list``."""
    from inspector.footage.store import FootageStore

    with FootageStore(args.store) as store:
        s = store.summary()
        s["needs_review"] = len(store.needs_review())
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"store {args.store}: {s['frames']} frames")
    print("splits: " + ", ".join(f"{k} {v}" for k, v in sorted(s["splits"].items())))
    print("labels: " + ", ".join(f"{k} {v}" for k, v in sorted(s["labels"].items())))
    print("label sources: " + ", ".join(f"{k} {v}" for k, v in sorted(s["label_sources"].items())))
    print(f"need review: {s['needs_review']}")
    return 0


def cmd_frames(args: argparse.Namespace) -> int:
    """``footage frames``: one line per frame."""
    from inspector.footage.store import FootageStore

    with FootageStore(args.store) as store:
        recs = store.records(
            split=args.split, label=args.label, source_glob=args.source, limit=args.limit
        )
    for r in recs:
        row = {
            "frame_id": r.frame_id,
            "split": r.split,
            "label": r.label,
            "label_source": r.label_source,
            "source_file": r.source_file,
            "source_format": r.source_format,
            "source_root": r.source_root,
            "source_split": r.source_split,
            "image_path": r.image_path,
        }
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"{r.frame_id}  {r.split:<7} {r.label or '-':<14} {r.label_source or '-':<16} "
                f"{r.source_format or '-':<8} {r.source_file or '-'}"
            )
    if not args.json:
        print(f"{len(recs)} frames")
    return 0
