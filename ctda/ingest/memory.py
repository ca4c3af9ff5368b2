"""Handing freed memory back to the OS between reader stages.

Decoding leaves freed blocks in glibc's heap and in Arrow's memory pool; later stages
allocate differently sized numpy arrays that cannot reuse all of them, so without this the
peak RSS is the sum of both phases rather than the larger one. A read whose table is
analysed next keeps them (:func:`keeping_freed`): the analysis allocates more than the read
ever held, reuses those blocks, and would otherwise fault their pages in again.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pyarrow as pa


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None on other C libraries.

    Looked up among the symbols already loaded (CDLL(None)): ctypes.util.find_library
    would spawn ldconfig, a fork of this possibly large process.
    """
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_KEEP = contextvars.ContextVar("ctda_keep_freed", default=False)


@contextmanager
def keeping_freed() -> Iterator[None]:
    """Inside: :func:`release_free_memory` leaves freed memory to the process."""
    token = _KEEP.set(True)
    try:
        yield
    finally:
        _KEEP.reset(token)


def warm_for_analysis(json_bytes: int) -> threading.Thread | None:
    """Inside :func:`keeping_freed` (a read analysed next): warm the heap the analysis will
    take (:func:`ctda.allocation.warm_heap`, sized like a command's first warm-up), on
    the core the read's single-threaded end leaves idle. The thread, or None."""
    if not _KEEP.get():
        return None
    from ctda.allocation import warm_for_json

    return warm_for_json(json_bytes)


def release_free_memory() -> None:
    """Return freed heap and Arrow pool memory to the OS (a few ms; no-op where unsupported,
    or inside :func:`keeping_freed`)."""
    if _KEEP.get():
        return
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
