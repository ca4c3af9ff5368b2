"""Handing freed memory back to the OS between reader stages.

Decoding leaves freed blocks in glibc's heap and in Arrow's memory pool; later stages
allocate differently sized numpy arrays that cannot reuse all of them, so without this the
peak RSS is the sum of both phases rather than the larger one.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

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


def release_free_memory() -> None:
    """Return freed heap and Arrow pool memory to the OS (a few ms; no-op where unsupported)."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
