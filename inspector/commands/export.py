"""``inspector export``: a trained run -> ONNX (fp32, optional int8)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from inspector.commands._args import add_threads_argument, positive_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a trained run to ONNX",
        description="Export a trained policy to one ONNX graph; checks parity with torch.",
    )
    p.add_argument(
        "model",
        help="run directory or model.zip; the ensemble directory of train --members exports"
        " its members as one graph",
    )
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--int8", action="store_true", help="also quantise to int8 (written to --out)")
    p.add_argument(
        "--observations", type=positive_int, default=1000, help="observations for parity"
    )
    p.add_argument(
        "--eval-episodes", type=positive_int, default=100, help="parts to evaluate fp32 vs int8"
    )
    p.add_argument(
        "--ensemble",
        action="append",
        default=[],
        metavar="RUN",
        help="another trained run (same profile settings) whose verdict joins this one's:"
        " the graph's class probabilities are the runs' geometric mean, this run still"
        " chooses where to look; repeat for more. Calibrate the exported model afterwards",
    )
    p.add_argument("--camera", help="camera for the parity observations (default: the run's)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    add_threads_argument(p)
    p.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.export.onnx import export_report

    out = Path(args.out)
    if out.suffix != ".onnx":
        raise InspectorError(f"--out must end in .onnx, got {out}")
    run = Path(args.model)
    run, ensemble, ensemble_dir = _members_run(run, list(args.ensemble))
    args.ensemble = ensemble
    run_dir = run if run.is_dir() else run.parent
    camera, params = args.camera, parse_params(args.param)
    if camera is None:
        cam_file = run_dir / "camera.json"
        if cam_file.is_file():
            c = json.loads(cam_file.read_text())
            camera, params = c["camera"], {**c["params"], **params}
        else:
            camera = "synthetic"
    rep = export_report(
        run,
        out,
        args.int8,
        camera,
        params,
        n_obs=args.observations,
        eval_episodes=args.eval_episodes,
        ensemble=args.ensemble,
        ensemble_dir=ensemble_dir,
    )
    p = rep["parity_fp32"]
    if args.ensemble:
        print(
            f"verdict ensemble of {len(rep['ensemble'])} runs, led by {run} (its moves,"
            " their joint verdict); "
            + (
                f"at the operating point train chose for it (ok bias {rep['ok_bias']:+.2f})"
                if rep.get("ok_bias")
                else "uncalibrated: run inspector calibrate on the .onnx"
            )
        )
    print(
        f"wrote {rep['onnx']}: parity vs torch on {p['observations']} observations: "
        f"max |diff| logits {p['max_abs_diff_action_logits']:.2e}, "
        f"action agreement {p['action_agreement']:.4f}"
    )
    if args.int8:
        q = rep["int8_vs_fp32"]
        print(
            f"wrote {rep['onnx_int8']}: int8 action agreement with fp32 "
            f"{q['action_agreement']:.4f}, verdict agreement {q['verdict_agreement']:.4f}"
        )
        if "eval_accuracy" in rep:
            e = rep["eval_accuracy"]
            print(
                f"evaluation on {e['episodes']} fixed parts: accuracy fp32 {e['fp32']:.3f}, "
                f"int8 {e['int8']:.3f} (change {e['change']:+.3f})"
            )
    return 0


def _members_run(run: Path, ensemble: list[str]) -> tuple[Path, list[str], Path | None]:
    """The lead, further members and ensemble directory to export: an ensemble directory
    of ``train --members`` stands for its members (lead first) and carries their
    operating point; the run above it is refused with the two things it holds."""
    from inspector.errors import InspectorError
    from inspector.train.distill import ensemble_members, is_ensemble_dir
    from inspector.train.students import members_run_refusal

    if is_ensemble_dir(run):
        if ensemble:
            raise InspectorError(f"{run} is an ensemble already; --ensemble adds nothing to it")
        lead, *rest = ensemble_members(run)
        return lead, [str(m) for m in rest], run
    refusal = members_run_refusal(run, "export")
    if refusal:
        raise InspectorError(refusal)
    return run, ensemble, None
