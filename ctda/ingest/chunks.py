"""Stage 1b: the event array's text cut into pieces of whole events, streamed.

Decoding the document in one go keeps the whole text and every decoded event alive at
once (about 10x the file size). Instead the text is streamed and the array is cut after
roughly ``chunk_bytes`` at an event boundary, so only a few pieces exist at a time and
they can be decoded in parallel.

A candidate cut is a ``}`` followed by ``,`` and ``{`` (with at most ``_GAP`` blanks
around the comma). Such a sequence can also occur inside a string or a nested object;
then the piece before it fails to decode as a list (it ends inside an event), and
:func:`merge` glues it back to the following piece.

Cutting is linear in the document: a search that finds no cut remembers how far it got,
and the next block's search resumes there (a cut is at most ``_CUT_MAX`` bytes long, so
it can only straddle the end of the searched text by that much).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ctda.ingest import source
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import Limits, check_regular

CHUNK_BYTES = 4 << 20
_GAP = 64
_CUT = re.compile(rb"}\s{0,%d},\s{0,%d}{" % (_GAP, _GAP))
_CUT_MAX = 2 * _GAP + 3


@dataclass
class Piece:
    """Some consecutive events as a JSON array text ``[ev, ..., ev]``.

    The last piece is ``[`` plus everything up to the end of the document: the array's
    own ``]`` is somewhere in it, followed by the rest of the document.
    """

    index: int
    offset: int  # position of text[1] in the decompressed document (for messages)
    text: bytes | bytearray  # a bytearray once merged (it grows in place)
    last: bool = False

    @property
    def data(self) -> bytes:
        """The text as bytes (decoders may keep views of it; a bytearray must stay resizable)."""
        return self.text if isinstance(self.text, bytes) else bytes(self.text)


def merge(first: Piece, second: Piece) -> Piece:
    """Rejoin two pieces whose cut fell inside an event (the cut's ``,`` is restored).

    The text grows in place (a merged piece owns a bytearray), so gluing many pieces
    onto one costs their total length, not the square of it.
    """
    text = first.text if isinstance(first.text, bytearray) else bytearray(first.text)
    text[-1:] = b","
    text += memoryview(second.text)[1:]
    return Piece(first.index, first.offset, text, second.last)


class Chunker:
    """Streams one file into pieces; afterwards holds the document framing and its size."""

    def __init__(self, path: Path, chunk_bytes: int = CHUNK_BYTES, limits: Limits | None = None) -> None:
        self.path = path
        self.chunk_bytes = max(chunk_bytes, 1)
        self.limits = limits if limits is not None else Limits.from_env()
        self._scanned = 0  # buf offset before which the last search found no cut
        self.framing: source.Framing | None = None
        self.n_bytes = 0
        self._base = 0
        self._index = 0

    def pieces(self, progress: Callable[[int], None] | None = None) -> Iterator[Piece]:
        """Pieces in document order; ``progress`` gets the compressed bytes consumed."""
        # buf[0] is the array's "[" or the "," of the last cut; a bytearray grows and
        # shrinks in place, so blocks are not copied into a fresh buffer each time
        buf = bytearray()
        self._base = 0  # document offset of buf[0]
        self._index = 0
        self._scanned = 0
        size = check_regular(self.path).st_size
        stream = source.open_stream(self.path)
        with stream:
            if getattr(stream, "fileobj", None) is None:  # plain JSON: its size is known
                self.limits.check(self.path, size, None)
            for block in source.read_blocks(self.path, stream):
                self.n_bytes += len(block)
                self.limits.check(self.path, self.n_bytes, source.compressed_position(stream))
                buf += block
                if self.framing is None:
                    found = source.find_array_start(self.path, bytes(buf), at_eof=False)
                    if found is None:
                        self.limits.check_unbroken(self.path, len(buf), "before the event array")
                        continue
                    self.framing, off = found
                    self.limits.check_unbroken(self.path, off, "before the event array")
                    del buf[:off]
                    self._base = off
                    self._scanned = 0
                # small first pieces: a worker can start on one while the rest is inflated
                yield from self._cut(buf, self.chunk_bytes if self._index else max(self.chunk_bytes // 4, 1))
                # what is left has no cut past the piece size: one stretch the decoder holds whole
                self.limits.check_unbroken(self.path, len(buf) - self.chunk_bytes)
                if progress is not None:
                    progress(source.compressed_position(stream))
        if self.framing is None:
            found = source.find_array_start(self.path, bytes(buf), at_eof=True)
            if found is None:  # pragma: no cover - at_eof always decides
                raise TraceError(self.path, "no traceEvents array")
            self.framing, off = found
            self.limits.check_unbroken(self.path, off, "before the event array")
            del buf[:off]
            self._base = off
        elif self._index:
            # the last piece is decoded in this process while workers finish theirs:
            # cutting the rest finer lets both sides finish at about the same time
            yield from self._cut(buf, max(self.chunk_bytes // 4, 1))
        self.limits.check_unbroken(self.path, len(buf) - self.chunk_bytes)  # the last piece
        buf[:1] = b"["
        yield Piece(self._index, self._base + 1, bytes(buf), last=True)

    def _cut(self, buf: bytearray, step: int) -> Iterator[Piece]:
        """Pieces of about ``step`` bytes from the front of ``buf``, which keeps the rest."""
        start = 0
        with memoryview(buf) as view:
            while (cut := self._next_cut(buf, start + step)) is not None:
                text = b"".join((b"[", view[start + 1 : cut], b"]"))
                yield Piece(self._index, self._base + start + 1, text)
                self._index, start = self._index + 1, cut
        del buf[:start]
        self._base += start
        self._scanned = max(self._scanned - start, 0)

    def _next_cut(self, buf: bytearray, target: int) -> int | None:
        """Offset of the ``,`` between two events at or after ``target``; None if none yet."""
        begin = max(target, self._scanned)
        if begin >= len(buf):
            return None
        m = _CUT.search(buf, begin)
        if m is None:
            self._scanned = max(len(buf) - _CUT_MAX, 0)
            return None
        return m.start() + m.group().index(b",")
