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
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
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
    if proc.returncode != 0 or not out:
        raise _death(proc.returncode, err, limits)
    status, payload = pickle.loads(out)
    if status == "ok":
        return payload
    kind, message = payload
    raise _errors().get(kind, QueryError)(message)


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


def _cap_memory(limits: QueryLimits, target: Any) -> None:
    """Bound the store engine (its backend's ``worker_memory``: an embedded store's buffer
    pool and reservation), then the address space."""
    import resource

    from ctda.store import backends

    cap = limits.memory_mb << 20
    reserve = backends.by_kind(target.kind).worker_memory(target, cap)
    limit = cap + reserve
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _serve() -> int:
    """The worker's main: one request on stdin, one pickled answer on stdout."""
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # library prints go to stderr
    target, text, params, write, allow_files, limits = pickle.loads(sys.stdin.buffer.read())
    from ctda.errors import CtdaError
    from ctda.store import open_store

    try:
        _cap_memory(limits, target)
        with open_store(target, read_only=not write) as store:
            result = store.query(text, params, write=write, allow_files=allow_files, limits=limits)
        reply: tuple[str, Any] = ("ok", result)
    except CtdaError as exc:
        reply = ("err", (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    except MemoryError:
        reply = ("err", ("QueryLimitError", str(limits.out_of_memory())))
    answer.write(pickle.dumps(reply))
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
