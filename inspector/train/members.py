"""``train --members K``: K members, their verdict ensemble, and one distilled student.

The run directory::

    RUN/members.json          what was asked (members, steps, seeds) and the results
    RUN/report.md             members, ensemble and student side by side
    RUN/members/m0 ... mK-1   one ordinary training run per member (seeds seed..seed+K-1)
    RUN/ensemble/             ensemble.json (the members, lead m0) + report.json/png
    RUN/student/              the distilled student: an ordinary run (export it)

Every member is described by a spec file (``member.json`` in its directory) and trained
by :func:`run_member`, in whatever process runs it: a local process
(``python -m inspector.train.members SPEC``) or a Ray task
(:mod:`inspector.train.cluster`). :func:`run_member` always resumes from the member's
last checkpoint, so a member whose process or worker died continues where its last
checkpoint left it, and a finished member (``cost.json`` written) is not trained again.

The student is the same kind of spec: initialised from the lead member's weights and
trained with the hybrid loss whose KL term's teacher is the ensemble
(:class:`inspector.train.distill.EnsembleTeacher`), ``distill_w_kd`` its weight. A
station then runs one agent at one agent's cost.

Each attempt at a spec is logged in ``attempts.json`` (process id, host, the step it
resumed from, CPU seconds, peak memory) and updated every few seconds while it runs,
so the CPU time of an attempt that was killed is counted too; ``cost.json`` sums them
when the spec finished, with the storage its directory takes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import resource
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig

log = logging.getLogger(__name__)

SPEC_FILE = "member.json"
ATTEMPTS_FILE = "attempts.json"
COST_FILE = "cost.json"
SUMMARY_FILE = "members.json"
TABLE_FILE = "report.md"
#: seconds between updates of a running attempt's CPU time in attempts.json
HEARTBEAT_S = 5.0


@dataclass
class MemberSpec:
    """One training run of a ``--members`` run (a member or the student).

    :param name: ``m0``..., or ``student``.
    :param profile: the reward profile file.
    :param camera: camera driver; ``params`` its parameters.
    :param timesteps: environment steps to train.
    :param out: the run directory.
    :param config: the TrainConfig fields.
    :param teacher: the teacher (an ensemble directory for the student), or None: the config's.
    :param init_from: a run whose weights initialise this one (the student: the lead).
    """

    name: str
    profile: str
    camera: str
    params: dict[str, Any]
    timesteps: int
    out: str
    config: dict[str, Any]
    teacher: str | None = None
    init_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def write(self) -> Path:
        """Write the spec to ``out/member.json`` (atomically) and return that path."""
        d = Path(self.out)
        d.mkdir(parents=True, exist_ok=True)
        _write_json(d / SPEC_FILE, dataclasses.asdict(self))
        return d / SPEC_FILE

    @classmethod
    def read(cls, path: str | Path) -> MemberSpec:
        """Read a spec file.

        :raises InspectorError: missing or broken.
        """
        try:
            return cls(**json.loads(Path(path).read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise InspectorError(f"{path}: not a member spec ({exc})") from None

    def train_config(self) -> TrainConfig:
        """The spec's TrainConfig (validated)."""
        cfg = TrainConfig(**self.config)
        cfg.validate()
        return cfg


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def is_done(run_dir: str | Path) -> bool:
    """Whether the spec of ``run_dir`` finished (its ``cost.json`` is written)."""
    return (Path(run_dir) / COST_FILE).is_file()


def storage_bytes(folder: str | Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _max_rss_mb() -> float:
    # ru_maxrss is KiB on Linux: the peak of this process (a reused Ray worker: so far).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@contextlib.contextmanager
def _attempt(out: Path, resumed_from: int) -> Iterator[dict[str, Any]]:
    """Record one attempt in attempts.json, updated every HEARTBEAT_S while it runs."""
    path = out / ATTEMPTS_FILE
    attempts = _read_json(path, [])
    cpu0, t0 = _cpu_s(), time.time()
    rec = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": t0,
        "resumed_from": int(resumed_from),
        "cpu_s": 0.0,
        "wall_s": 0.0,
        "max_rss_mb": _max_rss_mb(),
        "finished": False,
    }
    attempts.append(rec)
    lock = threading.Lock()

    def update() -> None:
        with lock:
            rec["cpu_s"] = round(_cpu_s() - cpu0, 2)
            rec["wall_s"] = round(time.time() - t0, 2)
            rec["max_rss_mb"] = round(_max_rss_mb(), 1)
            _write_json(path, attempts)

    update()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            update()

    th = threading.Thread(target=beat, daemon=True, name="member-heartbeat")
    th.start()
    try:
        yield rec
        rec["finished"] = True
    finally:
        stop.set()
        th.join()
        update()


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold ``out/.lock`` so that two processes never train the same member at once."""
    import fcntl

    f = open(out / ".lock", "a+")  # noqa: SIM115 (held for the whole run)
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InspectorError(
                f"{out} is being trained by another process; wait for it or stop it"
            ) from None
        yield
    finally:
        f.close()


def run_member(spec_path: str | Path) -> dict[str, Any]:
    """Train (or continue) the run of a spec file; return its cost.

    Resumes from the run's last checkpoint when there is one; a finished run is not
    trained again. Safe to call again after the process running it died.
    """
    from inspector.train.runner import train_run

    spec = MemberSpec.read(spec_path)
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    if is_done(out):
        return _read_json(out / COST_FILE, {})
    with _exclusive(out):
        latest = out / "checkpoints" / "latest.json"
        state = _read_json(latest, None) if latest.is_file() else None
        resumed_from = int(state["num_timesteps"]) if state else 0
        if resumed_from:
            log.warning("%s: resuming from step %d", spec.name, resumed_from)
        with _attempt(out, resumed_from):
            train_run(
                spec.profile,
                spec.camera,
                spec.params,
                spec.timesteps,
                out,
                spec.train_config(),
                teacher_path=spec.teacher,
                resume=state is not None,
                progress=False,
                init_from=spec.init_from,
            )
        attempts = _read_json(out / ATTEMPTS_FILE, [])
        cost = {
            "name": spec.name,
            "timesteps": spec.timesteps,
            "attempts": len(attempts),
            "cpu_s": round(sum(a.get("cpu_s", 0.0) for a in attempts), 2),
            "wall_s": round(sum(a.get("wall_s", 0.0) for a in attempts), 2),
            "max_rss_mb": max((a.get("max_rss_mb", 0.0) for a in attempts), default=0.0),
            "storage_bytes": storage_bytes(out),
            "checkpoint_bytes": storage_bytes(out / "checkpoints")
            if (out / "checkpoints").is_dir()
            else 0,
        }
        _write_json(out / COST_FILE, cost)
    return cost


def member_specs(
    profile: str,
    camera: str,
    params: Mapping[str, Any],
    timesteps: int,
    out: Path,
    cfg: TrainConfig,
    k: int,
) -> list[MemberSpec]:
    """The K members: seeds ``cfg.seed`` .. ``cfg.seed + K - 1``, in ``out/members/m<i>``."""
    base = dataclasses.asdict(cfg)
    return [
        MemberSpec(
            name=f"m{i}",
            profile=str(Path(profile).resolve()),
            camera=camera,
            params=dict(params),
            timesteps=int(timesteps),
            out=str((out / "members" / f"m{i}").resolve()),
            config={**base, "seed": cfg.seed + i},
        )
        for i in range(k)
    ]


def student_spec(
    profile: str,
    camera: str,
    params: Mapping[str, Any],
    timesteps: int,
    out: Path,
    cfg: TrainConfig,
    k: int,
) -> MemberSpec:
    """The student: the lead member's weights, the ensemble as the KL term's teacher.

    Nothing is pretrained again (the lead's perception and cloning carry over), the
    critic is the lead's (no warm-up), the KL weight is ``cfg.distill_w_kd``.
    """
    ens = (out / "ensemble").resolve()
    config = {
        **dataclasses.asdict(cfg),
        "seed": cfg.seed + k,
        "teacher": str(ens),
        "w_kd": cfg.distill_w_kd,
        "bc_samples": 0,
        "perception_samples": 0,
        "critic_warmup": 0,
    }
    return MemberSpec(
        name="student",
        profile=str(Path(profile).resolve()),
        camera=camera,
        params=dict(params),
        timesteps=int(timesteps),
        out=str((out / "student").resolve()),
        config=config,
        teacher=str(ens),
        init_from=str((out / "members" / "m0").resolve()),
    )


@dataclass
class MembersResult:
    """What ``train --members`` produced."""

    out: Path
    student: Path
    ensemble: Path
    summary: dict[str, Any]


def _check_same_run(out: Path, asked: Mapping[str, Any]) -> None:
    """On --resume, refuse settings that differ from the run's."""
    have = _read_json(out / SUMMARY_FILE, {}).get("asked")
    if not have:
        return
    for key, value in asked.items():
        if key in have and have[key] != value:
            raise InspectorError(
                f"{out} was started with {key}={have[key]!r}, not {value!r}; resume it with"
                " the same settings or choose another --out"
            )


def train_members(
    profile_path: str,
    camera: str,
    camera_params: Mapping[str, Any],
    timesteps: int,
    out: str | Path,
    cfg: TrainConfig,
    k: int,
    *,
    resume: bool = False,
    ray_address: str | None = None,
    parallel: int | None = None,
    distill_timesteps: int | None = None,
) -> MembersResult:
    """K members, their ensemble and the distilled student; see the module docstring.

    :param ray_address: run the members (and the student) as Ray tasks on this
        cluster; ``out`` must then be a path every node sees.
    :param parallel: local member processes at once (default: sized to the cores).
    :param distill_timesteps: the student's steps (default ``cfg.distill_timesteps``,
        0 there: half a member's).
    :raises InspectorError: fewer than two members, a run directory of another run.
    """
    from inspector.train.cluster import run_specs

    if k < 2:
        raise InspectorError(f"--members needs at least 2 members, got {k}")
    out = Path(out)
    steps = distill_timesteps or cfg.distill_timesteps or max(1, timesteps // 2)
    asked = {"members": k, "timesteps": timesteps, "distill_timesteps": steps, "seed": cfg.seed}
    if (out / SUMMARY_FILE).is_file() and not resume:
        raise InspectorError(
            f"{out} already holds a --members run; pass --resume to continue it"
            " or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    _check_same_run(out, asked)
    _write_json(out / SUMMARY_FILE, {"asked": asked, "status": "members"})
    specs = member_specs(profile_path, camera, camera_params, timesteps, out, cfg, k)
    paths = [
        s.write() if not (Path(s.out) / SPEC_FILE).is_file() else Path(s.out) / SPEC_FILE
        for s in specs
    ]
    run_specs(paths, cfg, ray_address=ray_address, parallel=parallel)

    from inspector.train.distill import write_ensemble

    ens = write_ensemble(out / "ensemble", [s.out for s in specs])
    if not (ens / "report.json").is_file():
        _write_json(out / SUMMARY_FILE, {"asked": asked, "status": "ensemble"})
        evaluate_ensemble(ens, camera, {**camera_params, **cfg.eval_camera_params}, cfg)
    _write_json(out / SUMMARY_FILE, {"asked": asked, "status": "student"})
    student = student_spec(profile_path, camera, camera_params, steps, out, cfg, k)
    spath = Path(student.out) / SPEC_FILE
    run_specs(
        [spath if spath.is_file() else student.write()], cfg, ray_address=ray_address, parallel=1
    )
    summary = {"asked": asked, "status": "done", **summarise(out, [s.name for s in specs])}
    _write_json(out / SUMMARY_FILE, summary)
    (out / TABLE_FILE).write_text(table_markdown(summary))
    return MembersResult(out, Path(student.out), ens, summary)


def evaluate_ensemble(
    ens: Path, camera: str, params: Mapping[str, Any], cfg: TrainConfig
) -> dict[str, Any]:
    """Evaluate the ensemble of ``ens`` as train evaluates a run: report.json, report.png.

    Its CPU time goes to ``ens/cost.json``.
    """
    from inspector.train.distill import ensemble_policy
    from inspector.train.evaluate import evaluate, write_report

    cpu0 = _cpu_s()
    policy = ensemble_policy(ens)
    result, kept = evaluate(policy, camera, params, max(1, cfg.final_eval_episodes), keep=6)
    result["ensemble"] = list(_read_json(ens / "ensemble.json", {}).get("members", []))
    result["scan"] = dict(policy.meta.scan)
    write_report(result, kept, ens / "report.json", ens / "report.png")
    _write_json(ens / COST_FILE, {"name": "ensemble", "cpu_s": round(_cpu_s() - cpu0, 2)})
    return result


#: report.json keys of the table, and their headings.
COLUMNS = (
    ("accuracy", "accuracy"),
    ("balanced_accuracy", "balanced"),
    ("defect_recall", "defect recall"),
    ("false_alarm_rate", "false alarms"),
    ("defect_auroc", "AUROC"),
    ("mean_steps", "steps"),
    ("pixel_fraction", "pixels"),
)


def summarise(out: Path, members: Sequence[str]) -> dict[str, Any]:
    """Rows of members, ensemble and student: their report figures and CPU time.

    ``cpu_min`` is the row's own training (the ensemble: its evaluation), and
    ``cpu_min_to_deployable`` what it took to have that model: a member its own, the
    ensemble all members, the student all members and its distillation.
    """
    rows = []
    member_cpu = 0.0
    for name in members:
        d = out / "members" / name
        cost = _read_json(d / COST_FILE, {})
        member_cpu += cost.get("cpu_s", 0.0)
        rows.append(_row(name, d, cost, cost.get("cpu_s", 0.0)))
    ens_cost = _read_json(out / "ensemble" / COST_FILE, {})
    rows.append(_row("ensemble", out / "ensemble", ens_cost, member_cpu))
    st_cost = _read_json(out / "student" / COST_FILE, {})
    rows.append(_row("student", out / "student", st_cost, member_cpu + st_cost.get("cpu_s", 0.0)))
    return {"rows": rows}


def _row(name: str, folder: Path, cost: Mapping[str, Any], to_deployable_s: float) -> dict:
    report = _read_json(folder / "report.json", {})
    row: dict[str, Any] = {"name": name, "path": str(folder)}
    for key, _ in COLUMNS:
        row[key] = report.get(key)
    row["cpu_min"] = round(cost.get("cpu_s", 0.0) / 60.0, 2)
    row["cpu_min_to_deployable"] = round(to_deployable_s / 60.0, 2)
    row["attempts"] = cost.get("attempts")
    row["storage_mb"] = round(cost["storage_bytes"] / 2**20, 2) if "storage_bytes" in cost else None
    return row


def table_markdown(summary: Mapping[str, Any]) -> str:
    """The report table: one row per member, the ensemble and the student."""
    heads = ["model", *(h for _, h in COLUMNS), "CPU-min", "CPU-min to deployable"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for r in summary["rows"]:
        cells = [r["name"]]
        for key, _ in COLUMNS:
            v = r.get(key)
            cells.append("-" if v is None else f"{v:.3f}" if key != "mean_steps" else f"{v:.1f}")
        cells += [f"{r['cpu_min']:.1f}", f"{r['cpu_min_to_deployable']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    asked = summary.get("asked", {})
    lines += [
        "",
        f"{asked.get('members')} members of {asked.get('timesteps')} steps (seeds"
        f" {asked.get('seed')}..), student distilled for {asked.get('distill_timesteps')}"
        " steps. Figures: each run's report.json (its own evaluation parts; the ensemble"
        " at ok bias 0, uncalibrated). CPU minutes: user+system of the processes that"
        " trained it, killed attempts included.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m inspector.train.members SPEC``: train one spec (a local member process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m inspector.train.members SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    try:
        run_member(args[0])
    except InspectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
