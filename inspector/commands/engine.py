"""``inspector engine``: build and check TensorRT engines (the command line of
:mod:`inspector.export.tensorrt`).

Also runs as ``python -m inspector.commands.engine`` (what ``deploy/jetson`` scripts
call with the Jetson's own python): ``build`` an engine with the TensorRT Python API,
print the ``shapes`` trtexec needs, write the ``sidecar`` of an engine trtexec built,
or check ``parity`` with ONNX Runtime.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
from pathlib import Path

from inspector.errors import ExportError, InspectorError, MissingDependencyError, ModelError
from inspector.export.tensorrt import (
    PRECISIONS,
    build_engine,
    gpu_name,
    import_tensorrt,
    load_calibration_dir,
    parity_check,
    read_onnx_meta,
    read_sidecar,
    shape_profile,
    write_sidecar,
)

DOC = "Build and check TensorRT engines for exported inspector models."


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``engine`` verb (``inspector engine build|shapes|sidecar|parity``).

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser("engine", help="build and check TensorRT engines", description=DOC)
    _add_subcommands(p)
    p.set_defaults(func=run)
    return p


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m inspector.commands.engine", description=DOC)
    _add_subcommands(p)
    return p


def _add_subcommands(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="cmd", required=True)

    def batches(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--min-batch", type=int, default=1)
        sp.add_argument("--opt-batch", type=int, default=1)
        sp.add_argument("--max-batch", type=int, default=8)

    b = sub.add_parser("build", help="build an engine with the TensorRT Python API")
    b.add_argument("--onnx", required=True)
    b.add_argument("--out", required=True)
    prec = b.add_mutually_exclusive_group()
    prec.add_argument("--fp16", dest="fp16", action="store_true", default=True)
    prec.add_argument("--fp32", dest="fp16", action="store_false")
    b.add_argument("--int8", action="store_true")
    b.add_argument("--calib", help="directory of .npz calibration observations (for --int8)")
    b.add_argument("--calib-batch", type=int, default=8)
    b.add_argument("--calib-cache")
    b.add_argument("--workspace-mb", type=int, default=1024)
    b.add_argument("--cache-dir")
    b.add_argument("--timing-cache")
    batches(b)

    s = sub.add_parser("shapes", help="print trtexec --min/opt/maxShapes from the ONNX metadata")
    s.add_argument("--onnx", required=True)
    batches(s)

    c = sub.add_parser("sidecar", help="write <engine>.json for an engine trtexec built")
    c.add_argument("--onnx", required=True)
    c.add_argument("--engine", required=True)
    c.add_argument("--precision", choices=PRECISIONS, default="fp16")
    c.add_argument("--tensorrt-version", default="", help="default: the installed tensorrt's")
    c.add_argument("--gpu", default="", help="default: the name of CUDA device 0, if any")
    batches(c)

    q = sub.add_parser("parity", help="compare the engine with ONNX Runtime on random inputs")
    q.add_argument("--onnx", required=True)
    q.add_argument("--engine", required=True)
    q.add_argument("--n", type=int, default=512)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--atol", type=float, default=None, help="default: 1e-3 fp16/int8, 1e-4 fp32")


def run(args: argparse.Namespace) -> int:
    """Run one ``engine`` sub-command; 1 when parity fails."""
    batch_kw = {}
    if hasattr(args, "min_batch"):
        batch_kw = dict(
            min_batch=args.min_batch, opt_batch=args.opt_batch, max_batch=args.max_batch
        )
    if args.cmd == "build":
        frames = load_calibration_dir(args.calib) if args.calib else None
        out = build_engine(
            args.onnx,
            args.out,
            fp16=args.fp16,
            int8=args.int8,
            calibration_frames=frames,
            calibration_batch=args.calib_batch,
            calibration_cache=args.calib_cache,
            workspace_mb=args.workspace_mb,
            cache_dir=args.cache_dir,
            timing_cache=args.timing_cache,
            **batch_kw,
        )
        print(out)
    elif args.cmd == "shapes":
        print(" ".join(shape_profile(read_onnx_meta(args.onnx), **batch_kw).trtexec_args()))
    elif args.cmd == "sidecar":
        if not Path(args.engine).is_file():
            raise ModelError(f"{args.engine}: no such engine file")
        meta = read_onnx_meta(args.onnx)
        version = args.tensorrt_version
        if not version:
            try:
                version = import_tensorrt().__version__
            except MissingDependencyError:
                version = ""
        gpu = args.gpu
        if not gpu:
            try:
                gpu = gpu_name()
            except ExportError:
                gpu = ""
        print(
            write_sidecar(
                args.engine,
                meta,
                onnx_sha256=hashlib.sha256(Path(args.onnx).read_bytes()).hexdigest(),
                precision=args.precision,
                profile=shape_profile(meta, **batch_kw),
                tensorrt_version=version,
                gpu=gpu,
            )
        )
    else:  # parity
        info = read_sidecar(args.engine)
        atol = args.atol if args.atol is not None else (1e-4 if info.precision == "fp32" else 1e-3)
        rep = parity_check(args.onnx, args.engine, n=args.n, seed=args.seed)
        print(
            json.dumps(
                {
                    "n": rep.n,
                    "precision": info.precision,
                    "atol": atol,
                    "max_abs_diff": rep.max_abs_diff,
                    "action_agreement": rep.action_agreement,
                }
            )
        )
        if not rep.ok(atol):
            print(f"parity: FAIL (max |diff| above {atol})", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; InspectorError becomes one line and exit status 2."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except InspectorError as exc:
        print(f"inspector: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
