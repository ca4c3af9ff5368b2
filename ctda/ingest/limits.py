"""What a trace may cost to read: bounds checked while it is read, each a one-line error.

- ``max_bytes``: decompressed bytes of one trace (``$CTDA_MAX_TRACE_BYTES`` or ``ctda
  --max-trace-bytes``; the UI has its own, ``--max-trace-mb``). Checked before reading a
  plain file (its size) and on every decompressed block of a gzip file.
- ``max_ratio``: how many times its compressed size a gzip file may expand
  (``$CTDA_MAX_EXPANSION``; 0 turns it off). Real Kineto traces expand 10-30x; a
  decompression bomb expands about 1000x, so it is refused after its first
  ``RATIO_FLOOR`` bytes, long before it costs time or memory.
- Only regular files are read: a FIFO, a character device (``/dev/zero``) or a socket
  may never end, and the file is read twice (digest, then trace).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from ctda.ingest.errors import TraceError

MAX_BYTES_ENV = "CTDA_MAX_TRACE_BYTES"
MAX_RATIO_ENV = "CTDA_MAX_EXPANSION"
DEFAULT_MAX_BYTES = 64 << 30
DEFAULT_MAX_RATIO = 200.0
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
    """Bounds on one trace read."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_ratio: float = DEFAULT_MAX_RATIO

    @classmethod
    def from_env(cls) -> Limits:
        """Defaults, overridden by ``$CTDA_MAX_TRACE_BYTES`` and ``$CTDA_MAX_EXPANSION``."""
        out = cls()
        raw = os.environ.get(MAX_BYTES_ENV, "").strip()
        if raw:
            try:
                out = cls(parse_size(raw), out.max_ratio)
            except ValueError as exc:
                raise TraceError(f"${MAX_BYTES_ENV}", str(exc)) from None
        raw = os.environ.get(MAX_RATIO_ENV, "").strip()
        if raw:
            try:
                out = cls(out.max_bytes, float(raw))
            except ValueError:
                raise TraceError(f"${MAX_RATIO_ENV}", f"not a number: {raw!r}") from None
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


def check_regular(path: Path) -> os.stat_result:
    """The file's stat, if it is a regular file; else a one-line TraceError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise TraceError(path, "is a directory, not a trace file")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO" if stat.S_ISFIFO(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file"
        )  # fmt: skip
        raise TraceError(path, f"is {kind}, not a regular file (it may never end)")
    return st
