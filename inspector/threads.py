"""How many threads the product's libraries use: one place, sized to the cores it is given.

torch, OpenMP (and the BLAS libraries behind numpy), OpenCV and ONNX Runtime each
start a thread pool as large as the machine by default. On a machine shared with
other jobs, or with several processes of one run (member processes, SubprocVecEnv
workers), those pools oversubscribe the cores, and torch's OpenMP barriers then
wait milliseconds for descheduled threads: training was seen to slow 40x that way,
and ``OMP_NUM_THREADS=1`` brought it back.

The count, first found of: ``--threads N``, the environment variable
``INSPECTOR_THREADS``, ``OMP_NUM_THREADS`` (what a user already set for OpenMP),
else the cores this process may use (``os.sched_getaffinity``: a ``taskset`` or a
container's cpuset counts, not the machine's cores). :func:`configure` applies it to
every library; :func:`ort_session_options` gives ONNX Runtime the same count.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inspector.errors import InspectorError

#: The environment variable that sets the thread count (as ``--threads`` does).
ENV = "INSPECTOR_THREADS"
#: Set for the libraries that read their pool size from the environment when they start.
LIBRARY_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ThreadPlan:
    """A thread count and where it came from.

    :param count: threads per library pool.
    :param source: ``--threads``, ``INSPECTOR_THREADS``, ``OMP_NUM_THREADS`` or ``cores``.
    """

    count: int
    source: str

    def describe(self) -> str:
        """A short phrase for start-up lines (``2 threads (the cores this process may use)``)."""
        why = {
            "--threads": "--threads",
            ENV: ENV,
            "OMP_NUM_THREADS": "OMP_NUM_THREADS",
            "cores": "the cores this process may use",
        }.get(self.source, self.source)
        return f"{self.count} thread{'s' if self.count != 1 else ''} ({why})"


def _count(text: str, where: str) -> int:
    try:
        n = int(str(text).strip())
    except ValueError:
        raise InspectorError(f"{where} must be a positive integer, got {text!r}") from None
    if n < 1:
        raise InspectorError(f"{where} must be a positive integer, got {text!r}")
    return n


def resolve(threads: int | None = None, environ: Mapping[str, str] | None = None) -> ThreadPlan:
    """The thread count for ``--threads`` (None: not given), the environment and the cores.

    :param threads: the ``--threads`` value, or None.
    :param environ: the environment (default ``os.environ``).
    :raises InspectorError: a count below 1 or ``INSPECTOR_THREADS`` that is not a number.
    """
    env = os.environ if environ is None else environ
    if threads is not None:
        return ThreadPlan(_count(str(threads), "--threads"), "--threads")
    if env.get(ENV, "").strip():
        return ThreadPlan(_count(env[ENV], ENV), ENV)
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) >= 1:  # OpenMP accepts lists too; those are ignored
        return ThreadPlan(int(omp), "OMP_NUM_THREADS")
    return ThreadPlan(available_cores(), "cores")


def preset_environment(argv: list[str]) -> None:
    """Export the thread count of ``argv``'s ``--threads`` (or of the environment) for
    OpenMP and the BLAS libraries before anything imports numpy or torch.

    The command line is parsed properly afterwards; a value this cannot read is left
    for the parser to report, and nothing is set.

    :param argv: the command line after the program name.
    """
    flag = None
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            flag = argv[i + 1]
        elif arg.startswith("--threads="):
            flag = arg.split("=", 1)[1]
    try:
        plan = resolve(int(flag) if flag is not None else None)
    except (ValueError, InspectorError):
        return
    for var in LIBRARY_ENV:
        os.environ[var] = str(plan.count)


_applied: ThreadPlan | None = None


def configure(threads: int | None = None, *, torch: bool = True) -> ThreadPlan:
    """Size every library's thread pool for this process (and the processes it starts).

    Sets ``OMP_NUM_THREADS`` and its kin and ``INSPECTOR_THREADS`` in the environment
    (libraries that start later read them; child processes inherit them), OpenCV's
    ``cv2.setNumThreads``, torch's intra-op and inter-op threads (imported here when
    ``torch``; set anyway when torch is already imported), and the BLAS and OpenMP pools
    already loaded (numpy's OpenBLAS, through threadpoolctl). Call it before the work
    starts: torch refuses a new inter-op count once it ran parallel work (then the
    intra-op count still applies).

    :param threads: ``--threads`` (None: from the environment or the cores).
    :param torch: import torch to set its threads (commands that train or evaluate).
    :returns: the plan applied.
    """
    global _applied
    plan = resolve(threads)
    n = str(plan.count)
    for var in LIBRARY_ENV:
        os.environ[var] = n
    os.environ[ENV] = n
    try:
        import cv2

        cv2.setNumThreads(plan.count)
    except ImportError:  # pragma: no cover - opencv is a core dependency
        pass
    if torch or "torch" in sys.modules:
        _torch_threads(plan.count)
    _loaded_pools(plan.count)
    _applied = plan
    return plan


def _loaded_pools(n: int) -> None:
    """Resize the BLAS and OpenMP pools already loaded (numpy's OpenBLAS started before
    the environment said anything: the package imports numpy)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; without it the env vars apply
        return
    try:
        threadpool_limits(n)
    except Exception as exc:  # noqa: BLE001 - a library that refuses keeps its own count
        logging.getLogger(__name__).debug("threadpoolctl could not resize a pool: %s", exc)


def _torch_threads(n: int) -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(n)
    except RuntimeError:  # already set, or parallel work already ran: keep what it has
        pass


def current() -> int:
    """The thread count applied by :func:`configure`, else what it would apply."""
    return (_applied or resolve()).count


def ort_session_options(opts: Any, threads: int | None = None) -> Any:
    """ONNX Runtime ``SessionOptions`` with ``threads`` intra-op threads (default
    :func:`current`) and one inter-op thread (a policy graph is one sequential chain).

    :param opts: an ``onnxruntime.SessionOptions``.
    :param threads: intra-op threads; 0 leaves ONNX Runtime's own default.
    """
    n = current() if threads is None else int(threads)
    if n:
        opts.intra_op_num_threads = n
        opts.inter_op_num_threads = 1
    return opts
