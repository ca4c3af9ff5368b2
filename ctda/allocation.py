"""How ctda's own processes (the command line, and the bench that measures it) take memory.

The reader and the engine make hundreds of large, short-lived numpy arrays. Left to the
defaults, each one costs fresh pages from the kernel, zeroed at the first touch of each:
on a 1.8M-event trace, ``ctda analyze`` took 630k page faults. Two settings avoid most:

* **No transparent huge-page advice.** numpy advises huge pages (``madvise``) for every
  array of 4 MiB or more; where the kernel honours that advice by compacting memory at the
  first touch (``defrag`` set to ``madvise``, a common default), a new array stalls while a
  2 MiB page is found and zeroed. Measured: ``ctda analyze`` 5.3 s on average with the
  advice, 5.0 s without, and the read's spread from run to run (1.3-2.1 s) gone.
* **Large blocks from the heap, kept for reuse** (glibc). By default a block above 128 KiB
  (up to 32 MiB as the threshold adapts) is mapped anew and unmapped when freed, and the
  heap's free top goes back to the kernel at once, so the next array faults its pages in
  again. With blocks up to 256 MiB taken from the heap and 1 GiB of its free top kept, the
  same analysis took 437k faults and 4.4 s instead of 4.85 s, for 3 % more peak memory.
  A bare read still hands freed memory back at its stage boundaries
  (:func:`ctda.ingest.memory.release_free_memory`); a read analysed next keeps it for the
  analysis (392k faults, 0.18 s less, 1-3 % more peak). Every thread takes memory from the
  one heap: glibc gives other threads arenas of 64 MiB heaps, whose larger blocks are
  mapped anew regardless, and a Dask worker runs each rank's analysis in a thread (a
  1M-event rank: 345-393k faults and 3.6-3.9 CPU s in a thread, 262-272k and 3.4 s in the
  main thread or with one arena).

Two more, for the command line's work:

* **No BLAS server threads.** numpy's OpenBLAS starts a thread per core that spins for a
  while after start-up; ctda makes no BLAS call, and on two cores the spinning took 2 % of
  ``ctda analyze``'s samples (:func:`no_blas_threads`, through the environment).
* **The heap faulted in on an idle core** (:func:`warm_heap`): a command that will read a
  trace spends its first 0.3-0.4 s importing on one core; meanwhile another thread touches
  the heap the analysis will take anyway and frees it, so those pages are not faulted in
  later on the critical path. A read analysed next warms as much again once its pieces
  are decoded, while it stacks them into a table on one core
  (:func:`ctda.ingest.memory.warm_for_analysis`), for the engine's own arrays. On a
  1.78M-event trace (381 MB of JSON; the analysis takes 1.3 GB), interleaved runs of
  ``ctda analyze``: 3.3-3.7 s against 4.0-4.4 s with the first warm-up (a slow hour), a
  median of 3.63 s against 3.92 s with the second added to it, for 5 % more peak memory.
  Warming more than the heap keeps free (``KEEP_FREE``) is trimmed at once.

The huge-page advice and the BLAS threads go through the environment, so processes ctda
starts (the UI server, a local Dask cluster's workers) inherit them; a value already there
is the user's choice and wins. The heap settings apply to this process and the ones it
forks. None is applied to a program that imports ctda as a library: it calls
``ctda.api.tune_memory()`` itself if it wants them (and :func:`warm_heap_for` before a read).
"""

from __future__ import annotations

import os
import stat
import sys
import threading

ENV = "NUMPY_MADVISE_HUGEPAGE"
#: glibc's mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
#: blocks below this come from the heap (glibc versions that cap the setting get their cap)
HEAP_BLOCKS = (256 << 20, 32 << 20)
#: free memory at the heap's top kept for the next allocations
KEEP_FREE = 1 << 30


#: what a command warms at most: below KEEP_FREE (glibc trims a larger free top at once)
WARM_MAX = 768 << 20
#: warm this many times the trace's JSON (the analysis takes about 3x)
WARM_PER_BYTE = 2
#: heap blocks: below the mmap threshold also where glibc caps it (HEAP_BLOCKS' second)
_WARM_BLOCK = 16 << 20
#: deflate expands at most about 1032:1, so a gzip trailer claiming more is not believed
_MAX_GZIP_RATIO = 1032
_tuned: list[bool] = []  # heap_blocks() took effect in this process
BLAS_ENV = "OPENBLAS_NUM_THREADS"


def tune_memory() -> None:
    """The settings for a process that runs ctda's work."""
    small_pages()
    no_blas_threads()
    if heap_blocks():
        _tuned.append(True)


def no_blas_threads() -> None:
    """One OpenBLAS thread in this process (unless numpy is loaded already) and the processes
    it starts, unless the user set ``BLAS_ENV``."""
    os.environ.setdefault(BLAS_ENV, "1")


def small_pages() -> None:
    """Turn numpy's huge-page advice off in this process and the processes it starts
    (through the environment, which numpy reads when imported), unless ``ENV`` is set."""
    if ENV in os.environ:
        return
    os.environ[ENV] = "0"
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # imported already: the environment is read no more
        numpy._core.multiarray._set_madvise_hugepage(False)


def heap_blocks() -> bool:
    """Large blocks from glibc's heap, its free top kept, for every thread; False where
    there is no glibc."""
    import ctypes  # here, not at import: the command line's start-up does not need it

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    if not any(mallopt(_M_MMAP_THRESHOLD, size) for size in HEAP_BLOCKS):
        return False
    # one arena: a thread's own arena grows in heaps of at most 64 MiB, so its larger
    # blocks are mapped anew whatever the threshold (a Dask worker runs each task in a thread)
    mallopt(_M_ARENA_MAX, 1)
    return bool(mallopt(_M_TRIM_THRESHOLD, KEEP_FREE))


def warm_heap(nbytes: int) -> threading.Thread | None:
    """Fault in about ``nbytes`` of the heap (at most ``WARM_MAX``) in a thread and free it,
    for the work to come to reuse (see the module's notes). Only where :func:`tune_memory`
    keeps the heap's free top and a second core is ours; None where nothing is started."""
    from ctda.forking import usable_cpus

    size = min(nbytes, WARM_MAX) // _WARM_BLOCK * _WARM_BLOCK
    if not _tuned or size <= 0 or usable_cpus() < 2:
        return None
    thread = threading.Thread(target=_touch, args=(size,), name="ctda-warm-heap", daemon=True)
    thread.start()
    return thread


def _touch(size: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None)  # ctypes calls release the GIL: the importing thread runs on
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = []
    try:
        for _ in range(size // _WARM_BLOCK):
            block = libc.malloc(_WARM_BLOCK)
            if not block:
                break
            blocks.append(block)
            libc.memset(block, 0, _WARM_BLOCK)
    finally:
        for block in blocks:
            libc.free(block)


def warm_heap_for(path: str | os.PathLike[str]) -> threading.Thread | None:
    """:func:`warm_heap` sized for reading and analysing the trace at ``path``
    (``WARM_PER_BYTE`` times its JSON; a gzip file's from its trailer)."""
    try:
        size = json_bytes(path)
    except OSError:
        return None  # the command reports the file's problem itself
    return warm_for_json(size)


def warm_for_json(nbytes: int) -> threading.Thread | None:
    """:func:`warm_heap` for reading and analysing ``nbytes`` of trace JSON."""
    return warm_heap(WARM_PER_BYTE * nbytes)


def json_bytes(path: str | os.PathLike[str]) -> int:
    """The size of the JSON text in ``path``: a gzip file's trailer gives it modulo 4 GiB
    (at least the compressed size, at most what deflate can expand it to); 0 for anything
    but a regular file of JSON or gzip (never opened: a FIFO would block)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return 0
    with open(path, "rb") as fh:
        magic = fh.read(4)
        if magic == b"PAR1":  # a ctda table: far smaller than the JSON it came from
            return 0
        if magic[:2] != b"\x1f\x8b":
            return st.st_size
        fh.seek(-4, os.SEEK_END)
        trailer = int.from_bytes(fh.read(4), "little")  # a truncated file's is any 4 bytes
        return max(min(trailer, _MAX_GZIP_RATIO * st.st_size), st.st_size)
