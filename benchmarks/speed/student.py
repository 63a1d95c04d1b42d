"""Station cost of a ``train --members`` run's models: the student against a member and
the ensemble it stands in for.

``train --members K`` distils its ensemble into one student so that a station runs one
agent at one agent's cost. The footage preset's student is four times as wide as its
members (docs/training.md), so "one agent's cost" has to be measured, not assumed. For
one finished run this exports the lead member, the ensemble (one graph: the lead's
moves, every member's verdict) and the student to ONNX, records observations from real
episodes on the run's val frames, and times a batch-1 ``forward`` of each in ONNX Runtime
(CPU provider, one thread, as a station core runs it). The baseline is the member,
timed in the same run. Per part, each model's cost is its glimpse time times the steps
it takes per part in the run's own closing evaluation (``members.json``).

Run from the repository root, on a quiet machine::

    python -m benchmarks.speed.student RUN [--quick]

Writes the ``student_latency`` section of docs/benchmarks.md. Exit status 1 when the
student costs more per glimpse than the ensemble it replaces.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.harness import load_average, parser, table, write_section
from benchmarks.speed.common import glimpse_latency, percentiles


def onnx_parameters(path: Path) -> int:
    """Weights in an ONNX graph (the elements of its initialisers)."""
    import onnx

    graph = onnx.load(str(path)).graph
    return int(sum(np.prod(t.dims, dtype=np.int64) for t in graph.initializer))


def _rows_by_name(run: Path) -> dict[str, dict]:
    from inspector.train.members import SUMMARY_FILE

    summary = run / SUMMARY_FILE
    if not summary.is_file():
        raise SystemExit(f"{run} holds no {SUMMARY_FILE}: not a finished train --members run")
    data = json.loads(summary.read_text())
    if data.get("status") != "done":
        raise SystemExit(f"{run} is not finished (status {data.get('status')!r})")
    return {r["name"]: r for r in data["rows"]}


def export_models(
    run: Path, out: Path, students: tuple[str, ...] = ("student",)
) -> tuple[dict[str, Path], str]:
    """The lead member, the ensemble and each of ``students`` (folders of ``run``) of
    ``run`` as ONNX files in ``out``, and the lead's name."""
    from inspector.export.onnx import export_onnx
    from inspector.train.distill import ensemble_members

    lead, *rest = ensemble_members(run / "ensemble")
    paths = {
        "member": export_onnx(lead, out / "member.onnx"),
        "ensemble": export_onnx(
            lead, out / "ensemble.onnx", ensemble=rest, ensemble_dir=run / "ensemble"
        ),
    }
    for name in students:
        if not (run / name / "model.zip").is_file():
            raise SystemExit(f"{run / name} holds no model.zip: not a finished student")
        paths[name] = export_onnx(run / name, out / f"{name}.onnx")
    return paths, Path(lead).name


def _steps_per_part(run: Path, name: str, rows: dict[str, dict]) -> float | None:
    """Mean steps per part in the closing evaluation: the run's table, else the
    folder's own report.json (a student trained beside the run's own)."""
    from inspector.train.member_run import read_json

    if name in rows:
        return rows[name].get("mean_steps")
    return read_json(run / name / "report.json", {}).get("mean_steps")


def _frames(student: Path) -> tuple[str, dict, str]:
    """(camera, params, what they are) to record observations on: the frames the
    student's checkpoints were judged on (val), else its training frames."""
    from inspector.train.member_run import MemberSpec, read_json

    select = read_json(student / "select.json", {})  # none or unreadable: no val frames
    kept = (select.get("kept") or {}) if isinstance(select, dict) else {}
    frames = kept.get("frames") if isinstance(kept, dict) else None
    if frames and frames.get("camera"):
        return frames["camera"], dict(frames.get("params") or {}), "the run's val frames"
    spec = MemberSpec.read(student / "member.json")
    return spec.camera, dict(spec.params), "the run's training frames (it has no val frames)"


def measure(
    run: Path,
    workdir: Path,
    n_obs: int,
    n_calls: int,
    max_s: float,
    students: tuple[str, ...] = ("student",),
) -> dict:
    """Export, record observations on the val frames, time each model; the figures.
    The observations are those of the first student's episodes."""
    from inspector.export.onnx import record_observations
    from inspector.policy.onnx_backend import OrtPolicy

    rows = _rows_by_name(run)
    paths, lead = export_models(run, workdir, students)
    camera, params, frames = _frames(run / students[0])
    cpu = ["CPUExecutionProvider"]
    policies = {k: OrtPolicy(p, providers=cpu, threads=1) for k, p in paths.items()}
    obs = record_observations(policies[students[0]], camera, params, n_obs)
    out: dict = {"observations": int(len(obs["state"])), "frames": frames, "lead": lead}
    out["models"] = {}
    for name in ("member", "ensemble", *students):
        t = glimpse_latency(policies[name], obs, n_calls, max_s=max_s)
        p50, p99, mean = percentiles(t)
        out["models"][name] = {
            "p50_ms": p50 * 1e3,
            "p99_ms": p99 * 1e3,
            "mean_ms": mean * 1e3,
            "calls": len(t),
            "parameters": onnx_parameters(paths[name]),
            "bytes": paths[name].stat().st_size,
            "steps_per_part": _steps_per_part(run, lead if name == "member" else name, rows),
        }
    return out


def report(label: str, m: dict) -> tuple[str, bool]:
    """The markdown body and whether the (first) student costs less per glimpse than the
    ensemble."""
    base = m["models"]["member"]
    base_part = base["mean_ms"] * base["steps_per_part"] if base["steps_per_part"] else None
    rows = []
    for name, x in m["models"].items():
        shown = f"member ({m['lead']}, the lead)" if name == "member" else name
        steps = x["steps_per_part"]
        part = x["mean_ms"] * steps if steps else None
        rows.append([
            shown, f"{x['parameters']:,}", f"{x['bytes'] / 1024:,.0f}", f"{x['p50_ms']:.3f}",
            f"{x['p99_ms']:.3f}", f"{x['p50_ms'] / base['p50_ms']:.2f}x",
            "-" if steps is None else f"{steps:.2f}",
            "-" if part is None else f"{part:.2f}",
            "-" if part is None or not base_part else f"{part / base_part:.2f}x",
            f"{x['calls']:,}",
        ])  # fmt: skip
    ens = m["models"]["ensemble"]
    students = [k for k in m["models"] if k not in ("member", "ensemble")]
    ok = m["models"][students[0]]["p50_ms"] < ens["p50_ms"]
    heads = ["model", "parameters", "ONNX KiB", "per glimpse p50 ms", "p99 ms",
             "vs member (p50)", "steps per part (test)", "per part ms (mean x steps)",
             "vs member", "calls"]  # fmt: skip
    body = (
        f"The models of the `train --members` run `{label}`, exported to ONNX (fp32) and"
        " run by ONNX Runtime on the CPU provider at one thread, batch 1, on"
        f" {m['observations']:,} observations recorded from the student's own episodes on"
        f" {m['frames']}. The member is the ensemble's lead (the baseline, timed in"
        " the same run); the ensemble is one graph (the lead's moves, every member's"
        " verdict). Steps per part: the mean over the test split in the run's own closing"
        " evaluation, at each model's chosen search depth; per part = mean glimpse time"
        " times those steps (the scanner's own work not included).\n\n"
        + table(heads, rows)
        + "".join(
            f"\n{'The student' if k == 'student' else f'Student `{k}`'} per glimpse:"
            f" {x['p50_ms'] / ens['p50_ms']:.2f}x the ensemble's time"
            f" ({'cheaper' if x['p50_ms'] < ens['p50_ms'] else '**not cheaper**'}),"
            f" {x['p50_ms'] / base['p50_ms']:.2f}x a member's.\n"
            for k, x in ((k, m["models"][k]) for k in students)
        )
    )
    return body, ok


def main(argv: list[str] | None = None) -> int:
    """Measure one run and write the section; 0, or 1 when the student is not cheaper."""
    ap = parser(__doc__, quick="fewer observations and calls")
    ap.add_argument("run", type=Path, help="a finished train --members run directory")
    ap.add_argument("--label", help="the run's name in the report (default: its folder's)")
    ap.add_argument("--student", action="append", metavar="NAME",
                    help="a student folder of RUN to time (repeat for several; the first"
                    " one's episodes give the observations; default: the student the"
                    " run kept)")  # fmt: skip
    args = ap.parse_args(argv)
    import torch

    from inspector.train.students import kept_student

    torch.set_num_threads(1)
    kw = dict(n_obs=200, n_calls=500, max_s=5.0) if args.quick else {}
    kw = {"n_obs": 1000, "n_calls": 5000, "max_s": 60.0, **kw}
    with tempfile.TemporaryDirectory(prefix="inspector-student-") as tmp:
        kept = [kept_student(args.run).name]
        m = measure(args.run, Path(tmp), students=tuple(args.student or kept), **kw)
    label = args.label or args.run.name
    body, ok = report(label, m)
    body += f"\nLoad average at the end: {load_average():.1f}.\n"
    cmd = "python -m benchmarks.speed.student RUN" + (" --quick" if args.quick else "")
    cmd += "".join(f" --student {k}" for k in args.student or [])
    cmd += f" (RUN: {label})"
    print(body)
    if not args.no_write:
        title = "Station cost of the distilled student"
        print(f"wrote {write_section('student_latency', title, body, cmd, doc=args.doc)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
