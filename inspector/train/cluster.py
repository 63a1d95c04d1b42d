"""Where the members of ``train --members`` run: local processes, or Ray tasks.

Every member is a spec file (:class:`inspector.train.member_run.MemberSpec`) that
:func:`inspector.train.member_run.run_member` trains, resuming from the member's last
checkpoint. So running a member again after its process died *is* the recovery:

* **local** (no Ray): one process per member (``python -m inspector.train.member_run
  SPEC``), as many at once as the machine's cores allow for the config (a member with
  ``vec_env: subproc`` uses ``n_envs`` cores); a member that exits with an error is
  started again from its checkpoint (twice at most). Each process dies with the
  ``train`` that started it (Linux: parent-death signal), so an interrupted ``train``
  leaves no member running behind a later ``--resume``.
* **Ray** (``--ray ADDRESS`` or ``RAY_ADDRESS``): one task per member, ``num_cpus`` the
  member's cores. A task whose worker dies (node lost, OOM kill, ``kill -9``) is retried
  by Ray on another worker, and it continues from the checkpoint in the run directory,
  which must therefore be storage every node sees (NFS, a shared volume). Ray is the
  optional extra ``inspector[ray]``; see ``docs/cluster.md``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig

log = logging.getLogger(__name__)

#: times a local member process is started again after it failed
LOCAL_RETRIES = 2
#: times Ray runs a member task again after its worker died
RAY_RETRIES = 3


def cores() -> int:
    """CPU cores this process may use."""
    from inspector.threads import available_cores

    return available_cores()


def member_cpus(cfg: TrainConfig) -> int:
    """Cores one member keeps busy: its environments' processes with ``subproc``, else 1."""
    return cfg.n_envs if cfg.vec_env == "subproc" and cfg.n_envs > 1 else 1


def local_parallelism(cfg: TrainConfig, n: int, parallel: int | None = None) -> int:
    """Member processes at once: ``parallel`` if given, else what the cores hold."""
    if parallel is not None:
        if parallel < 1:
            raise InspectorError(f"--parallel must be at least 1, got {parallel}")
        return min(parallel, n)
    return max(1, min(n, cores() // member_cpus(cfg)))


def run_specs(
    specs: Sequence[Path],
    cfg: TrainConfig,
    *,
    ray_address: str | None = None,
    parallel: int | None = None,
) -> None:
    """Train every spec to the end, on Ray when ``ray_address`` is given, else locally.

    :raises InspectorError: a member failed for good (its log's tail in the message).
    """
    if ray_address:
        run_ray(specs, ray_address, member_cpus(cfg))
    else:
        run_local(specs, local_parallelism(cfg, len(specs), parallel))


def _package_root() -> str:
    import inspector

    return str(Path(inspector.__file__).resolve().parents[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """preexec_fn: the member process gets SIGKILL when ``train`` dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _start(spec: Path, threads: int) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (_package_root(), env.get("PYTHONPATH", "")) if p
    )
    # Each member gets its share of the run's threads: the parent's own count (which
    # configure exported) would oversubscribe the cores once per member.
    from inspector.threads import ENV, LIBRARY_ENV

    for var in (ENV, *LIBRARY_ENV):
        env[var] = str(threads)
    logf = open(spec.parent / "train.log", "ab")  # noqa: SIM115 (handed to the child)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "inspector.train.member_run", str(spec)],
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
        )
    finally:
        logf.close()


def _log_tail(spec: Path, n: int = 8) -> str:
    try:
        lines = (spec.parent / "train.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-n:] if line.strip())


def run_local(specs: Sequence[Path], parallel: int) -> None:
    """Run the specs as local processes, ``parallel`` at a time, each retried on failure."""
    from inspector.train.member_run import is_done
    from inspector.train.watch import MembersProgress

    todo = [Path(s) for s in specs if not is_done(Path(s).parent)]
    lines = MembersProgress()  # the members log to their own train.log files
    from inspector.threads import current

    threads = max(1, current() // max(1, parallel))
    running: dict[Path, subprocess.Popen] = {}
    failures: dict[Path, int] = {}
    try:
        while todo or running:
            while todo and len(running) < parallel:
                spec = todo.pop(0)
                log.warning(
                    "member %s: starting (log: %s)", spec.parent.name, spec.parent / "train.log"
                )
                running[spec] = _start(spec, threads)
            time.sleep(0.5)
            lines.poll([s.parent for s in running])
            for spec, proc in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del running[spec]
                if rc == 0:
                    continue
                failures[spec] = failures.get(spec, 0) + 1
                if failures[spec] > LOCAL_RETRIES or rc == 2:
                    raise InspectorError(
                        f"member {spec.parent.name} failed (exit {rc}): {_log_tail(spec)}"
                    )
                log.warning(
                    "member %s exited with %d: starting it again from its checkpoint",
                    spec.parent.name,
                    rc,
                )
                todo.insert(0, spec)
    finally:
        for proc in running.values():
            proc.kill()
            proc.wait()


def _ray_member(spec: str) -> dict[str, Any]:
    """The Ray task: train one spec (in the worker's process)."""
    import logging as _logging

    from inspector.train.member_run import run_member

    handler = _logging.FileHandler(Path(spec).parent / "train.log")
    handler.setFormatter(_logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    root = _logging.getLogger()
    root.addHandler(handler)
    try:
        return run_member(spec)
    finally:
        root.removeHandler(handler)
        handler.close()


def import_ray() -> Any:
    """Ray, or an InspectorError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise InspectorError(
            "--ray needs Ray: pip install 'inspector[ray]' (or pip install ray) on this"
            " machine and every node of the cluster"
        ) from None
    return ray


def run_ray(specs: Sequence[Path], address: str, cpus: int) -> None:
    """Run the specs as Ray tasks on the cluster at ``address``.

    A task whose worker dies is retried (``RAY_RETRIES`` times) and resumes from its
    checkpoint; the specs' directories must be on storage every node sees.
    """
    from inspector.train.member_run import is_done

    ray = import_ray()
    todo = [str(Path(s).resolve()) for s in specs if not is_done(Path(s).parent)]
    if not todo:
        return
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InspectorError(f"cannot reach the Ray cluster at {address}: {exc}") from None
    try:
        task = ray.remote(num_cpus=cpus, max_retries=RAY_RETRIES)(_ray_member)
        refs = {task.remote(s): s for s in todo}
        log.warning("%d member(s) submitted to the Ray cluster at %s", len(refs), address)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    ray.get(ref)
                except Exception as exc:  # a task error or a worker lost RAY_RETRIES times
                    raise InspectorError(
                        f"member {Path(refs[ref]).parent.name} failed on Ray: {exc}"
                    ) from None
    finally:
        if started_here:
            ray.shutdown()
