"""Workers that decode pieces while the main process decompresses and cuts.

The native reader releases the GIL while it reads a piece, so threads overlap it
(:class:`ThreadDecodePool`): no process to start, no text copied to a worker or columns
copied back (on a 1.78M-event trace the decode took 1.6-1.8 CPU s in threads against
2.1 s in processes, in about the same wall time: the CPU is left to what runs beside it).
msgspec holds the GIL while it builds Python objects, so the Python path uses forked
processes (:class:`DecodePool`), which share the already-imported modules and start in
milliseconds. Workers take pieces from one shared queue, which balances the load by itself.

A process pool's bulk data does not go through its queues: each piece in flight owns a
slot of a shared memory mapping (created before the fork, so every worker sees it). The main
process copies the piece's text into its slot; the worker decodes it in place and writes
the resulting columns back into the same slot (pickle protocol 5, buffers out of band),
so the queues carry only small messages and nothing is pickled twice.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import mmap
import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import warnings
from multiprocessing.queues import Queue
from typing import Any

from ctda.forking import die_with, usable_cpus
from ctda.ingest import native
from ctda.ingest.decode import Decoded, decode_piece

#: how long to wait for a result (or a task) before checking that the other side is alive
POLL_SECONDS = 0.5
#: a piece: (index, slot, length) with its text in the slot, or (index, -1, text) if too big
Task = tuple[int, int, "int | bytes"]
#: a result: (index, pickled header, buffer lengths in the slot) or (index, Decoded or None)
Result = tuple[int, bytes, list[int]] | tuple[int, Decoded | None]


def pool_available() -> bool:
    """Whether decode workers can help: a second core is ours, and either the native reader
    (threads) or Linux (forked processes: fork is unsafe with macOS system frameworks,
    absent on Windows)."""
    return usable_cpus() >= 2 and (native.enabled() or sys.platform.startswith("linux"))


def start_pool(workers: int, depth: int, slot_bytes: int) -> ThreadDecodePool | DecodePool:
    """Threads where pieces are read natively, else processes (``slot_bytes``: the largest
    piece a process's slot holds)."""
    if native.enabled():
        return ThreadDecodePool(workers, depth)
    return DecodePool(workers, depth, slot_bytes)


class WorkerLost(RuntimeError):
    """A worker process died (e.g. killed for memory); the pieces in flight must be redone."""


class _Bounded:
    """At most ``workers * depth`` pieces in flight (to bound memory), by index in ``_pending``."""

    def __init__(self, workers: int, depth: int) -> None:
        self.capacity = workers * depth
        self._pending: dict[int, Any] = {}  # per piece in flight: a future, or a slot

    @property
    def inflight(self) -> set[int]:
        return set(self._pending)

    @property
    def full(self) -> bool:
        return len(self._pending) >= self.capacity


class ThreadDecodePool(_Bounded):
    """Threads running :func:`decode_piece` (the native reader, which releases the GIL)."""

    def __init__(self, workers: int, depth: int) -> None:
        super().__init__(workers, depth)
        self._executor = cf.ThreadPoolExecutor(workers, thread_name_prefix="ctda-decode")

    def submit(self, index: int, text: bytes) -> None:
        self._pending[index] = self._executor.submit(decode_piece, text)

    def results(self, wait: bool) -> list[tuple[int, Decoded | None]]:
        """Results ready now; with ``wait``, at least one (unless none is in flight).
        A piece whose decode raised is None: the caller decodes it again, where the
        error surfaces as it would without workers."""
        if wait and self._pending:
            cf.wait(self._pending.values(), return_when=cf.FIRST_COMPLETED)
        done = [index for index, future in self._pending.items() if future.done()]
        out: list[tuple[int, Decoded | None]] = []
        for index in done:
            future = self._pending.pop(index)
            out.append((index, None if future.exception() is not None else future.result()))
        return out

    def close(self) -> None:
        """Stop the threads; pieces not yet started are abandoned."""
        self._executor.shutdown(wait=True, cancel_futures=True)


class _Slots:
    """Equal regions of one anonymous shared mapping."""

    def __init__(self, count: int, size: int) -> None:
        self.size = size
        self.memory = mmap.mmap(-1, count * size)  # MAP_SHARED: forked children see writes
        self.free = list(range(count))

    def region(self, slot: int, length: int) -> memoryview:
        return memoryview(self.memory)[slot * self.size : slot * self.size + length]


class DecodePool(_Bounded):
    """Forked processes running :func:`decode_piece` on submitted pieces."""

    def __init__(self, workers: int, depth: int, slot_bytes: int) -> None:
        super().__init__(workers, depth)
        self._slots = _Slots(self.capacity, slot_bytes)
        ctx = mp.get_context("fork")
        self._todo: Queue[Task | None] = ctx.Queue()
        self._done: Queue[Result] = ctx.Queue()
        self._procs = [
            ctx.Process(
                target=_serve,
                args=(self._todo, self._done, self._slots, os.getpid()),
                name=f"ctda-decode-{i}",
                daemon=True,
            )
            for i in range(workers)
        ]
        with warnings.catch_warnings():
            # Python >= 3.12 warns on fork() with other threads alive (e.g. a progress bar's);
            # the children only run decode_piece and take no lock those threads could hold
            warnings.simplefilter("ignore", DeprecationWarning)
            # A child must never run the destructor of an object it inherited: a collected
            # embedded-store Database joins its thread pool, whose threads do not exist in the
            # child, and the child waits forever. Frozen objects are never collected, so the
            # children only collect what they allocate themselves.
            gc.freeze()
            try:
                for proc in self._procs:
                    proc.start()
            finally:
                gc.unfreeze()

    def submit(self, index: int, text: bytes) -> None:
        slot = self._slots.free.pop()
        self._pending[index] = slot
        if len(text) > self._slots.size:  # a huge event: send the text itself
            self._todo.put((index, -1, text))
            return
        with self._slots.region(slot, len(text)) as region:
            region[:] = text
        self._todo.put((index, slot, len(text)))

    def results(self, wait: bool) -> list[tuple[int, Decoded | None]]:
        """Results ready now; with ``wait``, at least one (unless none is in flight)."""
        out: list[tuple[int, Decoded | None]] = []
        while self._pending:
            try:
                item = self._done.get(timeout=POLL_SECONDS) if wait and not out else self._done.get_nowait()
            except queue.Empty:
                if not wait or out:
                    break
                if not all(p.is_alive() for p in self._procs):
                    codes = [p.exitcode for p in self._procs if not p.is_alive()]
                    raise WorkerLost(f"decode worker exited with code {codes[0]}") from None
                continue
            out.append((item[0], self._unpack(item)))
        return out

    def _unpack(self, item: Result) -> Decoded | None:
        """The result's Decoded, its buffers copied out of the slot, which is then free again."""
        slot = self._pending.pop(item[0])
        try:
            if len(item) == 2:
                return item[1]
            header, lengths = item[1], item[2]
            buffers, offset = [], slot * self._slots.size
            for n in lengths:
                buffers.append(bytearray(self._slots.memory[offset : offset + n]))
                offset += n
            decoded = pickle.loads(header, buffers=buffers)
            assert isinstance(decoded, Decoded)
            return decoded
        finally:
            self._slots.free.append(slot)

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
            self._slots.memory.close()


def _next_task(todo: Queue[Task | None], parent: int) -> Task | None:
    """The next task; None when told to stop or when the parent is gone."""
    while True:
        try:
            return todo.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if os.getppid() != parent:  # reparented: nobody will read our results
                return None


def _serve(todo: Queue[Task | None], done: Queue[Result], slots: _Slots, parent: int) -> None:
    """Worker loop: decode until told to stop; a crash on one piece hands it back to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    die_with(parent)
    while (task := _next_task(todo, parent)) is not None:
        index, slot, payload = task
        try:
            if isinstance(payload, bytes):
                done.put((index, decode_piece(payload)))
                continue
            with slots.region(slot, payload) as text:
                decoded = decode_piece(text)
            done.put(_pack(index, decoded, slots, slot))
        except Exception:  # the parent redoes the piece itself, where errors surface normally
            done.put((index, None))


def _pack(index: int, decoded: Decoded, slots: _Slots, slot: int) -> Result:
    """Write the result's buffers into the slot; the message keeps only the small rest."""
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(decoded, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    if sum(r.nbytes for r in raws) > slots.size:
        return (index, decoded)
    offset = slot * slots.size
    for raw in raws:
        slots.memory[offset : offset + raw.nbytes] = raw
        offset += raw.nbytes
    return (index, header, [r.nbytes for r in raws])
