"""A user's query in a worker process: whatever it does, the caller gets rows or one line.

The embedded store runs queries inside the calling process, so a query that crashes its
engine (a parser overflowing its stack) or eats the machine's memory would take the
caller with it: the CLI, or the whole UI server. :func:`run_isolated` runs the query in a
fresh interpreter (``python -m ctda.queries.worker``) instead, which

- caps its own address space (``RLIMIT_AS``: the query's memory cap plus the address range
  the embedded store reserves for its buffer pool, whose size is bounded too),
- runs the query through :meth:`ctda.store.base.Store.query` with its timeout and row cap,
- sends back the result or the error's class and one line (pickled, on its stdout).

The parent waits for the timeout plus :data:`ctda.queries.limits.GRACE_S` and kills the
worker past that; a worker that dies of a signal or of memory is one line too
(:class:`ctda.queries.limits.QueryLimitError`). The request (store target with its
credentials, query, parameters) travels on the worker's stdin, never its command line.

A caller that may fork safely (:func:`can_fork`: one thread, and none of the libraries
that run native threads loaded yet, as in ``ctda query``) gets a forked child instead of
a fresh interpreter: the same isolation and caps (the cap counts from the child's address
space at the fork), without a second interpreter's start-up and imports (``ctda query`` of
a named query: 0.42 -> 0.34 s). The UI server (threads) and library callers with an
engine loaded keep the fresh interpreter.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ctda.queries.errors import QueryError
from ctda.queries.limits import GRACE_S, QueryLimitError, QueryLimits


def _errors() -> dict[str, type[Exception]]:
    """Error classes a worker may report, by name (rebuilt from their one line)."""
    from ctda.errors import CtdaError
    from ctda.queries.gate import GateError
    from ctda.store.base import RefusedQuery, StoreError

    return {
        c.__name__: c for c in (RefusedQuery, GateError, QueryLimitError, QueryError, StoreError, CtdaError)
    }


def run_isolated(
    target: Any,
    text: str,
    params: dict[str, Any],
    *,
    write: bool = False,
    allow_files: bool = False,
    limits: QueryLimits,
) -> Any:
    """Rows of ``text`` on ``target`` (a resolved store target) run by a worker process
    under ``limits``: a :class:`ctda.store.base.QueryResult`, or a one-line
    :class:`QueryError`/``StoreError``."""
    if can_fork():
        return _answered(*_forked(target, text, params, write, allow_files, limits), limits)
    request = pickle.dumps((target, text, params, write, allow_files, limits))
    root = str(Path(__file__).resolve().parents[2])  # the worker imports this ctda
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctda.queries.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        out, err = proc.communicate(request, timeout=limits.timeout_s + GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise limits.timed_out() from None
    return _answered(proc.returncode, out, err, limits)


def _answered(code: int, out: bytes, err: bytes, limits: QueryLimits) -> Any:
    """The result a worker sent, or its error (or its death) as one line."""
    if code != 0 or not out:
        raise _death(code, err, limits)
    status, payload = pickle.loads(out)
    if status == "ok":
        return payload
    kind, message = payload
    raise _errors().get(kind, QueryError)(message)


#: loaded, these run native threads (thread pools, an open database's workers; numpy's
#: BLAS starts its pool on import): a fork copies none of those threads but may copy a
#: lock one of them held, so no fork then
THREADED = ("ladybug", "neo4j", "pyarrow", "numba", "torch", "numpy")


def can_fork() -> bool:
    """Whether :func:`run_isolated` may fork this process for its worker: a POSIX process
    running one thread, none of :data:`THREADED` imported (``$CTDA_QUERY_FORK=0`` says no)."""
    return (
        hasattr(os, "fork")
        and os.environ.get("CTDA_QUERY_FORK", "1") != "0"
        and threading.active_count() == 1
        and not any(name in sys.modules for name in THREADED)
    )


def _forked(
    target: Any, text: str, params: dict[str, Any], write: bool, allow_files: bool, limits: QueryLimits
) -> tuple[int, bytes, bytes]:
    """Run the query in a forked child: (exit code, or -signal; its answer; its stderr)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then leave without the parent's exit handlers
        code = 70
        try:
            os.close(out_r)
            os.close(err_r)
            os.dup2(err_w, 2)
            os.dup2(err_w, 1)  # library prints go to stderr, as in a fresh worker
            reply = _answer(target, text, params, write, allow_files, limits, forked=True)
            with os.fdopen(out_w, "wb") as answer:
                answer.write(pickle.dumps(reply))
            code = 0
        except BaseException as exc:  # anything at all: told on stderr, as a worker's death
            os.write(2, f"{type(exc).__name__}: {exc}\n".encode(errors="replace"))
        finally:
            os._exit(code)
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    deadline = time.monotonic() + limits.timeout_s + GRACE_S
    try:
        open_fds = [out_r, err_r]
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                raise limits.timed_out()
            ready, _, _ = select.select(open_fds, [], [], left)
            for fd in ready:
                data = os.read(fd, 1 << 20)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.remove(fd)
    except BaseException:  # past the deadline, or the caller interrupted: no orphan child
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(out_r)
        os.close(err_r)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code, b"".join(chunks[out_r]), b"".join(chunks[err_r])


def _death(code: int, err: bytes, limits: QueryLimits) -> QueryError:
    """The one line for a worker that ended without an answer."""
    tail = err.decode("utf-8", "replace").strip().splitlines()
    last = tail[-1][:200] if tail else ""
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        if -code == signal.SIGKILL:
            return limits.out_of_memory(" (the worker was killed)")
        return QueryLimitError(
            f"the query crashed the query engine ({name}); the query was not run to its end"
        )
    if "MemoryError" in last or "bad_alloc" in last or "memory" in last.lower():
        return limits.out_of_memory()
    return QueryError(f"the query worker failed (exit {code}): {last or 'no message'}")


def _cap_memory(limits: QueryLimits, target: Any, forked: bool = False) -> None:
    """Bound the store engine (its backend's ``worker_memory``: an embedded store's buffer
    pool and reservation), then the address space (a forked child's on top of what it
    inherited)."""
    import resource

    from ctda.store import backends

    cap = limits.memory_mb << 20
    reserve = backends.by_kind(target.kind).worker_memory(target, cap)
    limit = cap + reserve + (_address_space() if forked else 0)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _address_space() -> int:
    """Bytes of this process's address space now (Linux; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _answer(
    target: Any,
    text: str,
    params: dict[str, Any],
    write: bool,
    allow_files: bool,
    limits: QueryLimits,
    forked: bool = False,
) -> tuple[str, Any]:
    """A worker's reply: ("ok", result) or ("err", (error class name, one line))."""
    from ctda.errors import CtdaError
    from ctda.store import open_store

    try:
        _cap_memory(limits, target, forked)
        store = open_store(target, read_only=not write)
        try:
            result = store.query(text, params, write=write, allow_files=allow_files, limits=limits)
        finally:
            if write or not forked:  # a forked reader leaves at once: its exit frees the store
                store.close()
        return ("ok", result)
    except CtdaError as exc:
        return ("err", (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    except MemoryError:
        return ("err", ("QueryLimitError", str(limits.out_of_memory())))


def _serve() -> int:
    """The worker's main: one request on stdin, one pickled answer on stdout."""
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # library prints go to stderr
    request = pickle.loads(sys.stdin.buffer.read())
    answer.write(pickle.dumps(_answer(*request)))
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
