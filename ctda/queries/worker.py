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

A caller that may fork safely (:func:`ctda.forking.can_fork`: one thread, and none of the
libraries that run native threads loaded yet, as in ``ctda query``) gets a forked child
instead of a fresh interpreter: the same isolation and caps (the cap counts from the child's
address space at the fork), without a second interpreter's start-up and imports (``ctda
query`` of a named query: 0.42 -> 0.34 s). The console script forks that child before it
builds its command line (:func:`start_ahead`), so the child imports the store's driver and
opens the store meanwhile (0.31-0.35 -> 0.25 s); a later fork is the fallback. A forked
child's answer is framed (its length first), so the parent takes it as soon as it is whole
and does not wait for the child's exit, which unmaps the store's memory. The UI server
(threads) and library callers with an engine loaded keep the fresh interpreter.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctda.forking import FAILED, can_fork, die_with, frame, unframe
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
    ahead = _take_ahead()
    if ahead is not None and ahead.send(request):
        return _answered(*_collect(ahead.pid, ahead.answer, ahead.errors, limits), limits)
    if can_fork():
        return _answered(*_forked(request, limits), limits)
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


@dataclass
class _Ahead:
    """A query worker forked ahead of its request: its pid and the parent's ends of its
    pipes (request in; framed answer and stderr out)."""

    pid: int
    request: int
    answer: int
    errors: int

    def send(self, request: bytes) -> bool:
        """Hand the worker its request; False if it is gone (then it is reaped, its pipes closed)."""
        pipe, self.request = os.fdopen(self.request, "wb"), -1
        try:
            with pipe:  # closing it ends the request
                pipe.write(request)
            return True
        except OSError:  # it died before its request (e.g. its imports failed)
            self.discard()
            return False

    def discard(self) -> None:
        """Close the parent's ends and wait for the worker to leave (it sees its request end)."""
        for fd in (self.request, self.answer, self.errors):
            if fd >= 0:
                os.close(fd)
        self.request = self.answer = self.errors = -1
        os.waitpid(self.pid, 0)


_ahead: _Ahead | None = None


def start_ahead(store: str | None = None) -> None:
    """Fork a query worker now, if this process may (:func:`ctda.forking.can_fork`) and has
    none waiting: it imports the embedded store's driver and opens ``store`` read-only (a
    ``--db`` value; None: ``$CTDA_DB`` or the default), then waits for one request, which
    :func:`run_isolated` sends it. ``ctda query`` calls this before it builds its command
    line (about 0.1 s), so the worker's imports and open overlap that; a request for
    another store, or one that writes, opens its own as before. A worker nobody sends a
    request sees its request pipe close when this process exits, and leaves too."""
    global _ahead
    if _ahead is not None or not can_fork():
        return
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _serve_ahead(parent, store, (req_r, out_w, err_w), (req_w, out_r, err_r))
    for fd in (req_r, out_w, err_w):
        os.close(fd)
    _ahead = _Ahead(pid, req_w, out_r, err_r)


def _take_ahead() -> _Ahead | None:
    """The worker :func:`start_ahead` forked, once (None if there is none)."""
    global _ahead
    worker, _ahead = _ahead, None
    return worker


def _serve_ahead(
    parent: int, store: str | None, ends: tuple[int, int, int], parents: tuple[int, ...]
) -> None:
    """The worker forked ahead (``ends``: its request, answer and error pipes): the answer
    to the one request that arrives on the request pipe (:func:`_child`)."""
    req_r, out_w, err_w = ends

    def answer() -> bytes | None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        die_with(parent)
        _warm()
        opened = _open_ahead(store)
        with os.fdopen(req_r, "rb") as pipe:
            request = pipe.read()
        return framed_answer(request, opened) if request else None

    _child(parents, out_w, err_w, answer)


def _child(parents: tuple[int, ...], out_w: int, err_w: int, answer: Callable[[], bytes | None]) -> None:
    """A forked worker's body, never returning: close the parent's ends (``parents``),
    send library prints to the error pipe, write ``answer()`` (if any) on ``out_w``, and
    leave without the parent's exit handlers; anything raised is one line on the error
    pipe and exit code :data:`~ctda.forking.FAILED`."""
    code = FAILED
    try:
        for fd in parents:
            os.close(fd)
        os.dup2(err_w, 2)
        os.dup2(err_w, 1)  # library prints go to stderr, as in a fresh worker
        reply = answer()
        if reply is not None:
            with os.fdopen(out_w, "wb") as pipe:
                pipe.write(reply)
        code = 0
    except BaseException as exc:  # anything at all: told on stderr, as a worker's death
        os.write(2, f"{type(exc).__name__}: {exc}\n".encode(errors="replace"))
    finally:
        os._exit(code)


#: a store a worker opened ahead of its request: (its target, the memory cap it was opened
#: under in MB, the open store)
Opened = tuple[Any, int, Any]


def _open_ahead(spec: str | None) -> Opened | None:
    """The embedded store ``spec`` names, opened read-only under the environment's memory
    cap (:func:`_cap_memory`, the soft limit only, so a request with another cap can still
    set its own). None for a server or on any failure: the request then opens what it
    names, as it would have."""
    from ctda.store import open_store
    from ctda.store.config import resolve

    try:
        target = resolve(spec)
        if not target.is_path:
            return None
        limits = QueryLimits.from_env()
        _cap_memory(limits, target, forked=True, hard=False)
        return target, limits.memory_mb, open_store(target, read_only=True)
    except Exception:  # whatever it was, the request's own open meets it again and says so
        return None


def _forked(request: bytes, limits: QueryLimits) -> tuple[int, bytes, bytes]:
    """Run ``request`` in a forked child: (exit code, or -signal; its answer; its stderr)."""
    _reap()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child((out_r, err_r), out_w, err_w, lambda: framed_answer(request))
    os.close(out_w)
    os.close(err_w)
    return _collect(pid, out_r, err_r, limits)


def _collect(pid: int, out_r: int, err_r: int, limits: QueryLimits) -> tuple[int, bytes, bytes]:
    """What forked child ``pid`` says on its answer and error pipes (the parent's ends, closed
    here): (exit code, or -signal; its answer; its stderr). A child still running at the
    deadline is killed."""
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
            if out_r not in open_fds and (reply := unframe(b"".join(chunks[out_r]))) is not None:
                # answered in full: its exit (tearing down the store's memory) is not waited for
                _exiting.append(pid)
                return 0, reply, b"".join(chunks[err_r])
    except BaseException:  # past the deadline, or the caller interrupted: no orphan child
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(out_r)
        os.close(err_r)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return code, unframe(b"".join(chunks[out_r])) or b"", b"".join(chunks[err_r])


#: forked children that answered and were left to exit: reaped by the next fork
_exiting: list[int] = []


def _reap() -> None:
    """Collect the children that answered earlier and have exited since (never waits)."""
    for pid in list(_exiting):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # collected by someone else
            done = pid
        if done:
            _exiting.remove(pid)


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


def _cap_memory(limits: QueryLimits, target: Any, forked: bool = False, hard: bool = True) -> None:
    """Bound the store engine (its backend's ``worker_memory``: an embedded store's buffer
    pool and reservation), then the address space (a forked child's on top of what it
    inherited). ``hard=False`` sets the soft limit only, which a later cap may raise."""
    import resource

    from ctda.store import backends

    cap = limits.memory_mb << 20
    reserve = backends.by_kind(target.kind).worker_memory(target, cap)
    limit = cap + reserve + (_address_space() if forked else 0)
    resource.setrlimit(
        resource.RLIMIT_AS, (limit, limit if hard else resource.getrlimit(resource.RLIMIT_AS)[1])
    )


def _seal_memory() -> None:
    """Make the soft address-space limit the hard one too (nothing in the query may raise it)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))


def _address_space() -> int:
    """Bytes of this process's address space now (Linux; 0 where unknown)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _warm() -> None:
    """Import what answering a query on the embedded store needs (a worker forked ahead
    of its request does this while its parent is still busy)."""
    import ladybug  # noqa: F401

    import ctda.store.ladybug_store  # noqa: F401


def framed_answer(request: bytes, opened: Opened | None = None) -> bytes:
    """A forked worker's answer to a pickled request (:func:`run_isolated`'s arguments),
    on the store it ``opened`` ahead where the request reads that one under the same cap:
    the pickled reply, led by its length."""
    target, text, params, write, allow_files, limits = pickle.loads(request)
    return frame(
        pickle.dumps(_answer(target, text, params, write, allow_files, limits, forked=True, opened=opened))
    )


def _answer(
    target: Any,
    text: str,
    params: dict[str, Any],
    write: bool,
    allow_files: bool,
    limits: QueryLimits,
    forked: bool = False,
    opened: Opened | None = None,
) -> tuple[str, Any]:
    """A worker's reply: ("ok", result) or ("err", (error class name, one line)). A store
    ``opened`` ahead (:func:`_open_ahead`) answers a read of the same store and cap."""
    from ctda.errors import CtdaError
    from ctda.store import open_store

    try:
        if opened is not None and not write and opened[:2] == (target, limits.memory_mb):
            store = opened[2]
            _seal_memory()
        else:
            if opened is not None:
                opened[2].close()
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
