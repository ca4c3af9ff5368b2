"""What an input file may cost to read: bounds checked while it is read, each a one-line error.

One set of limits for every reader: single traces (``analyze``, ``ingest``, ``convert``, ...),
the ranks of a job, ``ctda merge``'s main trace and helpers, and the UI's uploads.

- ``max_bytes``: decompressed bytes of one file (``$CTDA_MAX_TRACE_BYTES`` or ``ctda
  --max-trace-bytes``, default 16 GiB; the UI has its own, ``--max-trace-mb``, default
  2 GiB). Checked before reading a plain file (its size) and on every decompressed block
  of a gzip file.
- ``max_ratio``: how many times its compressed size a gzip file may expand
  (``$CTDA_MAX_EXPANSION``, default 200; 0 turns it off). Real Kineto traces expand
  10-30x; a decompression bomb expands about 1000x, so it is refused after its first
  ``RATIO_FLOOR`` bytes, long before it costs time or memory.
- ``max_event_bytes``: the longest stretch of text without an event boundary: one event,
  or the document's text before or after the event array (``$CTDA_MAX_EVENT_BYTES``,
  default 64 MiB; a real event is well under 1 MiB). The reader holds such a stretch
  whole, so this bounds its memory whatever the ratio: a gzip of random bytes followed by
  gigabytes of blank space expands under the ratio cap, but is refused here.
- ``max_helper_bytes``: decompressed bytes of one ``ctda merge`` helper trace, which is
  held whole as Python objects (about 10x its text) while it is checked
  (``$CTDA_MAX_HELPER_BYTES``, default 256 MiB; a DataLoader worker's trace is a few MiB).
- Only regular files are read (symlinks are followed to what they name): a FIFO, a
  character device (``/dev/zero``) or a socket may never end, and a file is read twice
  (digest, then trace). The check is made on the opened descriptor, so a file swapped for
  a FIFO after the check cannot block the read.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from ctda.ingest.errors import TraceError

MAX_BYTES_ENV = "CTDA_MAX_TRACE_BYTES"
MAX_RATIO_ENV = "CTDA_MAX_EXPANSION"
MAX_EVENT_ENV = "CTDA_MAX_EVENT_BYTES"
MAX_HELPER_ENV = "CTDA_MAX_HELPER_BYTES"
DEFAULT_MAX_BYTES = 16 << 30
#: a streamed analysis holds a few steps, not the trace: its cap is the scratch disk's
STREAM_MAX_BYTES = 1 << 40
DEFAULT_MAX_RATIO = 200.0
DEFAULT_MAX_EVENT_BYTES = 64 << 20
DEFAULT_MAX_HELPER_BYTES = 256 << 20
#: the expansion ratio is only judged past this many decompressed bytes
RATIO_FLOOR = 16 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``123``, ``512M``, ``20G`` (binary units, optional ``B``/``iB``) -> bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a size: {text!r} (e.g. 512M, 20G)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def human(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]} {unit}iB"
    return f"{n:,} bytes"


@dataclass(frozen=True)
class Limits:
    """Bounds on one file read."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_helper_bytes: int = DEFAULT_MAX_HELPER_BYTES

    @classmethod
    def from_env(cls, max_bytes: int = DEFAULT_MAX_BYTES) -> Limits:
        """Defaults (``max_bytes`` for one file), overridden by ``$CTDA_MAX_TRACE_BYTES``,
        ``$CTDA_MAX_EXPANSION``, ``$CTDA_MAX_EVENT_BYTES`` and ``$CTDA_MAX_HELPER_BYTES``;
        a malformed value is a one-line error naming the variable."""
        out = cls(max_bytes=max_bytes)
        sizes = (
            (MAX_BYTES_ENV, "max_bytes"),
            (MAX_EVENT_ENV, "max_event_bytes"),
            (MAX_HELPER_ENV, "max_helper_bytes"),
        )
        for env, attr in sizes:
            raw = os.environ.get(env, "").strip()
            if raw:
                out = replace(out, **{attr: _size_env(env, raw)})
        raw = os.environ.get(MAX_RATIO_ENV, "").strip()
        if raw:
            try:
                ratio = float(raw)
            except ValueError:
                ratio = float("nan")
            if not ratio >= 0 or ratio == float("inf"):  # NaN fails the comparison
                raise TraceError(f"${MAX_RATIO_ENV}", f"not a number >= 0: {raw!r}")
            out = replace(out, max_ratio=ratio)
        return out

    def check(self, path: Path, decompressed: int, compressed: int | None) -> None:
        """Raise :class:`TraceError` once ``decompressed`` bytes break a bound."""
        if decompressed > self.max_bytes:
            raise TraceError(
                path,
                f"more than {human(self.max_bytes)} of JSON (the cap on decompressed bytes; "
                f"raise it with --max-trace-bytes or ${MAX_BYTES_ENV})",
            )
        ratio = decompressed / compressed if compressed else 0.0
        if self.max_ratio > 0 and decompressed > RATIO_FLOOR and ratio > self.max_ratio:
            raise TraceError(
                path,
                f"expands more than {self.max_ratio:g}x when decompressed (a decompression bomb?"
                f" raise the bound with ${MAX_RATIO_ENV})",
            )

    def check_unbroken(self, path: Path, length: int, where: str = "without an event boundary") -> None:
        """Raise :class:`TraceError` if ``length`` bytes of text ``where`` break the bound."""
        if length > self.max_event_bytes:
            raise TraceError(
                path,
                f"more than {human(self.max_event_bytes)} of text {where} (no real event is that "
                f"long; raise the bound with ${MAX_EVENT_ENV})",
            )


def _size_env(name: str, raw: str) -> int:
    try:
        return parse_size(raw)
    except ValueError as exc:
        raise TraceError(f"${name}", str(exc)) from None


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory, not a trace file"
    kind = (
        "a FIFO" if stat.S_ISFIFO(mode)
        else "a character device" if stat.S_ISCHR(mode)
        else "a block device" if stat.S_ISBLK(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "not a regular file"
    )  # fmt: skip
    return f"{kind}, not a regular file (it may never end)"


def check_regular(path: Path) -> os.stat_result:
    """The file's stat, if it is a regular file (after following symlinks); else a
    one-line TraceError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise TraceError(path, f"is {kind}")
    return st


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, if it is a regular file; else a one-line TraceError.

    Opened without blocking (a FIFO with no writer would block ``open`` itself) and
    checked on the descriptor, so what is read is what was checked.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise TraceError(path, f"is {kind}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
