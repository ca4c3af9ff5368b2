"""Stage 1a: a trace file's bytes, decompressed incrementally, and the document's framing.

A Kineto trace is one JSON document whose bulk is the ``traceEvents`` array (or, in the
2020 format, a bare array). :mod:`ctda.ingest.chunks` streams that text and cuts the array
into pieces; this module opens the file and finds where the array starts.
"""

from __future__ import annotations

import gzip
import re
import types
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ctda.ingest.errors import TraceError
from ctda.ingest.limits import open_regular

_gzip_impl: types.ModuleType
try:  # isal's inflate is ~2x zlib's; optional so the reader works without it
    from isal import igzip as _gzip_impl  # type: ignore[import-untyped,no-redef]
except ImportError:  # pragma: no cover - exercised only where isal is missing
    _gzip_impl = gzip

READ_BLOCK = 4 << 20
_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOM = b"\xef\xbb\xbf"


@dataclass
class Framing:
    """Where the event array sits in the document: text before and after it."""

    head: bytes
    tail: bytes = b""
    bare_list: bool = False


def open_stream(path: Path) -> BinaryIO:
    """Open ``path`` for reading decompressed bytes (gzip detected by magic, not suffix).

    Only a regular file is opened (:func:`ctda.ingest.limits.open_regular`): a FIFO or a
    device is a one-line error, never a read that does not end.
    """
    fh = open_regular(path)
    try:
        magic = fh.read(2)
        fh.seek(0)
    except OSError as exc:
        fh.close()
        raise TraceError(path, f"cannot read ({exc.strerror or exc})") from None
    if magic == b"\x1f\x8b":
        return _gzip_impl.open(fh, "rb")  # type: ignore[no-any-return]
    return fh


def compressed_position(stream: BinaryIO) -> int:
    """Bytes of the file consumed so far (the compressed offset for gzip streams)."""
    raw = getattr(stream, "fileobj", None) or stream
    return int(raw.tell())


def read_blocks(path: Path, stream: BinaryIO) -> Iterator[bytes]:
    """Yield decompressed blocks; corrupt or truncated compression becomes a TraceError."""
    try:
        while True:
            data = stream.read(READ_BLOCK)
            if not data:
                return
            yield data
    except EOFError:
        raise TraceError(path, "truncated gzip stream (the file ends early)") from None
    except (OSError, zlib.error) as exc:
        raise TraceError(path, f"corrupt gzip data ({exc})") from None


def find_array_start(path: Path, buf: bytes, at_eof: bool) -> tuple[Framing, int] | None:
    """Locate the event array; return the framing and the offset of its ``[``.

    None means more bytes are needed to decide.
    """
    stripped = buf.lstrip()
    if stripped.startswith(_BOM):
        stripped = stripped[len(_BOM) :].lstrip()
    if not stripped:
        if at_eof:
            raise TraceError(path, "empty file" if not buf else "no JSON content (only whitespace)")
        return None
    if stripped[:1] == b"[":
        return Framing(head=b"", bare_list=True), len(buf) - len(stripped)
    if stripped[:1] != b"{":
        raise TraceError(path, "not JSON (does not start with '{' or '[')")
    m = _ARRAY_START.search(buf)
    if m is None:
        if at_eof:
            raise TraceError(path, "no traceEvents array (not a Chrome/Kineto trace)")
        return None
    return Framing(head=buf[len(buf) - len(stripped) : m.end() - 1]), m.end() - 1
