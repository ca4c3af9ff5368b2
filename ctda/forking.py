"""Forked helper processes: when this process may fork one, and how a child dies with its parent.

A fork copies the calling thread only. A process running other threads (or with a library
loaded that runs its own: :data:`THREADED`) may have one of them holding a lock the child
then waits for forever, so :func:`can_fork` says no there and callers start a fresh
interpreter instead. Used by the reader's decode pool and the query worker.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: loaded, these run native threads (thread pools, an open database's workers; numpy's
#: BLAS starts its pool on import): a fork copies none of those threads but may copy a
#: lock one of them held, so no fork then
THREADED = ("ladybug", "neo4j", "pyarrow", "numba", "torch", "numpy")
#: prctl option: the signal a process gets when its parent dies (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: exit code of a child that failed without saying more
FAILED = 70


def can_fork() -> bool:
    """Whether this process may fork a worker: a POSIX process running one thread, none of
    :data:`THREADED` imported (``$CTDA_QUERY_FORK=0`` says no)."""
    return (
        hasattr(os, "fork")
        and os.environ.get("CTDA_QUERY_FORK", "1") != "0"
        and threading.active_count() == 1
        and not any(name in sys.modules for name in THREADED)
    )


def die_with(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), and check
    that the parent did not die before that request took effect."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux: callers check the parent too
        pass
    if os.getppid() != parent:
        os._exit(0)


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


#: bytes of the length that leads a child's framed answer
FRAME = 8


def frame(payload: bytes) -> bytes:
    """``payload`` led by its length, so a reader knows when it has all of it."""
    return len(payload).to_bytes(FRAME, "little") + payload


def unframe(data: bytes) -> bytes | None:
    """The payload of :func:`frame`'s output if ``data`` holds all of it, else None."""
    if len(data) < FRAME or int.from_bytes(data[:FRAME], "little") != len(data) - FRAME:
        return None
    return data[FRAME:]
