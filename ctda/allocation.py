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

The first goes through the environment, so processes ctda starts (the UI server, a local
Dask cluster's workers) inherit it; an ``NUMPY_MADVISE_HUGEPAGE`` already there is the
user's choice and wins. The second applies to this process and the ones it forks. Neither is
applied to a program that imports ctda as a library: it calls ``ctda.api.tune_memory()``
itself if it wants them.
"""

from __future__ import annotations

import os
import sys

ENV = "NUMPY_MADVISE_HUGEPAGE"
#: glibc's mallopt parameters
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
#: blocks below this come from the heap (glibc versions that cap the setting get their cap)
HEAP_BLOCKS = (256 << 20, 32 << 20)
#: free memory at the heap's top kept for the next allocations
KEEP_FREE = 1 << 30


def tune_memory() -> None:
    """Both settings, for a process that runs ctda's work."""
    small_pages()
    heap_blocks()


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
