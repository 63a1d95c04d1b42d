"""One run of ``train --members``, a member or the student, in whatever process runs it.

A run is described by a spec file (``member.json`` in its directory) and trained by
:func:`run_member`: in a local process (``python -m inspector.train.member_run SPEC``)
or in a Ray task (:mod:`inspector.train.cluster`). :func:`run_member` always resumes from
the run's last checkpoint, so a run whose process or worker died continues where its
last checkpoint left it, and a finished run (``cost.json`` written) is not trained again.

Each attempt is logged in ``attempts.json`` (process id, host, the step it resumed from,
CPU seconds, peak memory) and updated every few seconds while it runs, so the CPU time
of an attempt that was killed is counted too; ``cost.json`` sums them when the run
finished, with the storage its directory takes.
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.files import write_atomic
from inspector.train.config import TrainConfig

log = logging.getLogger(__name__)

SPEC_FILE = "member.json"
ATTEMPTS_FILE = "attempts.json"
COST_FILE = "cost.json"
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
        write_json(d / SPEC_FILE, dataclasses.asdict(self))
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


def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON, atomically (a coordinator polls these files)."""
    write_atomic(path, json.dumps(doc, indent=2) + "\n")


def read_json(path: Path, default: Any) -> Any:
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


def cpu_seconds() -> float:
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
    attempts = read_json(path, [])
    cpu0, t0 = cpu_seconds(), time.time()
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
            rec["cpu_s"] = round(cpu_seconds() - cpu0, 2)
            rec["wall_s"] = round(time.time() - t0, 2)
            rec["max_rss_mb"] = round(_max_rss_mb(), 1)
            write_json(path, attempts)

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
        return read_json(out / COST_FILE, {})
    with _exclusive(out):
        latest = out / "checkpoints" / "latest.json"
        state = read_json(latest, None) if latest.is_file() else None
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
        attempts = read_json(out / ATTEMPTS_FILE, [])
        cost = {
            "name": spec.name,
            "timesteps": spec.timesteps,
            "attempts": len(attempts),
            "cpu_s": round(sum(a.get("cpu_s", 0.0) for a in attempts), 2),
            "wall_s": round(sum(a.get("wall_s", 0.0) for a in attempts), 2),
            "max_rss_mb": max((a.get("max_rss_mb", 0.0) for a in attempts), default=0.0),
            "phases": read_json(out / "phases.json", {}),
            "storage_bytes": storage_bytes(out),
            "checkpoint_bytes": storage_bytes(out / "checkpoints")
            if (out / "checkpoints").is_dir()
            else 0,
        }
        write_json(out / COST_FILE, cost)
    return cost


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m inspector.train.member_run SPEC``: train one spec (a local member process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m inspector.train.member_run SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("inspector.progress").setLevel(logging.INFO)
    try:
        from inspector.threads import configure

        configure()  # the share of threads the parent gave this member (INSPECTOR_THREADS)
        run_member(args[0])
    except InspectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
