"""Worker processes that decode pieces while the main process decompresses and cuts.

msgspec holds the GIL while it builds Python objects, so threads would not overlap; forked
processes share the already-imported modules, start in milliseconds, and send back
compact columns. Workers take pieces from one shared queue, which balances the load by
itself; the main process mostly waits, so its queue feeder threads never starve for the
GIL.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import warnings
from multiprocessing.queues import Queue

from ctda.ingest.decode import Decoded, decode_piece

#: how long to wait for a result before checking that the workers are still alive
POLL_SECONDS = 0.5
Result = tuple[int, Decoded | None]


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def pool_available() -> bool:
    """Whether forked decode workers can help: fork exists and a second core is ours."""
    return usable_cpus() >= 2 and "fork" in mp.get_all_start_methods()


class WorkerLost(RuntimeError):
    """A worker process died (e.g. killed for memory); the pieces in flight must be redone."""


class DecodePool:
    """Forked processes running :func:`decode_piece` on submitted pieces."""

    def __init__(self, workers: int, depth: int) -> None:
        self.capacity = workers * depth  # pieces in flight at most, to bound memory
        ctx = mp.get_context("fork")
        self._todo: Queue[tuple[int, bytes] | None] = ctx.Queue()
        self._done: Queue[Result] = ctx.Queue()
        self._procs = [
            ctx.Process(target=_serve, args=(self._todo, self._done), name=f"ctda-decode-{i}", daemon=True)
            for i in range(workers)
        ]
        with warnings.catch_warnings():
            # Python >= 3.12 warns on fork() with other threads alive (e.g. a progress bar's);
            # the children only run decode_piece and take no lock those threads could hold
            warnings.simplefilter("ignore", DeprecationWarning)
            for proc in self._procs:
                proc.start()
        self.inflight: set[int] = set()

    @property
    def full(self) -> bool:
        return len(self.inflight) >= self.capacity

    def submit(self, index: int, text: bytes) -> None:
        self._todo.put((index, text))
        self.inflight.add(index)

    def results(self, wait: bool) -> list[Result]:
        """Results ready now; with ``wait``, at least one (unless none is in flight)."""
        out: list[Result] = []
        while self.inflight:
            try:
                item = self._done.get(timeout=POLL_SECONDS) if wait and not out else self._done.get_nowait()
            except queue.Empty:
                if not wait or out:
                    break
                if not all(p.is_alive() for p in self._procs):
                    codes = [p.exitcode for p in self._procs if not p.is_alive()]
                    raise WorkerLost(f"decode worker exited with code {codes[0]}") from None
                continue
            self.inflight.discard(item[0])
            out.append(item)
        return out

    def close(self) -> None:
        """Stop the workers; pieces still queued are abandoned."""
        try:
            for _ in self._procs:
                self._todo.put(None)
            for proc in self._procs:
                proc.join(timeout=2.0)
        finally:
            for proc in self._procs:
                if proc.is_alive():
                    proc.terminate()
                    proc.join(timeout=2.0)
            for q in (self._todo, self._done):
                q.cancel_join_thread()
                q.close()


def _serve(todo: Queue[tuple[int, bytes] | None], done: Queue[Result]) -> None:
    """Worker loop: decode until told to stop; a crash on one piece hands it back to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    while (item := todo.get()) is not None:
        index, text = item
        try:
            done.put((index, decode_piece(text)))
        except Exception:  # the parent redoes the piece itself, where errors surface normally
            done.put((index, None))
