"""A second process that decodes pieces while the main process decompresses and decodes others.

msgspec holds the GIL while it builds Python objects, so threads would not overlap; a
forked process shares the already-imported modules, starts in milliseconds, and sends
back compact Arrow batches. Pieces go out and results come back through queues whose
feeder threads keep either side from blocking on the pipe.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import warnings
from multiprocessing.queues import Queue

from ctda.ingest.decode import Decoded, decode_piece

#: how long to wait for a result before checking that the worker is still alive
POLL_SECONDS = 0.5
Result = tuple[int, Decoded | None]


def worker_available() -> bool:
    """Whether a forked decode worker can help: fork exists and a second core is ours."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        cpus = os.cpu_count() or 1
    return cpus >= 2 and "fork" in mp.get_all_start_methods()


class WorkerLost(RuntimeError):
    """The worker process died (e.g. killed for memory); its pieces must be redone."""


class DecodeWorker:
    """One forked process running :func:`decode_piece` on submitted pieces."""

    def __init__(self) -> None:
        ctx = mp.get_context("fork")
        self._todo: Queue[tuple[int, bytes] | None] = ctx.Queue()
        self._done: Queue[Result] = ctx.Queue()
        self._proc = ctx.Process(target=_serve, args=(self._todo, self._done), name="ctda-decode", daemon=True)
        with warnings.catch_warnings():
            # Python >= 3.12 warns on fork() with other threads alive (e.g. a progress bar's);
            # the child only runs decode_piece and takes no lock those threads could hold
            warnings.simplefilter("ignore", DeprecationWarning)
            self._proc.start()
        self.inflight: set[int] = set()

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
                if not self._proc.is_alive():
                    raise WorkerLost(f"decode worker exited with code {self._proc.exitcode}") from None
                continue
            self.inflight.discard(item[0])
            out.append(item)
        return out

    def close(self) -> None:
        """Stop the worker; pieces still queued are abandoned."""
        if self._proc.is_alive():
            try:
                self._todo.put(None)
                self._proc.join(timeout=2.0)
            finally:
                if self._proc.is_alive():
                    self._proc.terminate()
                    self._proc.join(timeout=2.0)
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
