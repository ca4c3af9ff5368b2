"""Stage 2: every piece decoded, in document order, with the work spread over the CPU cores.

The main thread decompresses and cuts the text; each piece is either sent to a decode
worker (threads for the native reader, processes for the Python one: ``ctda.ingest.pool``;
while they have fewer than ``DEPTH`` each queued) or decoded on the spot, which
balances the load without measuring it. Outcomes are then taken strictly in document order,
because only then is it known whether a piece really starts at an event boundary: a
piece that ends inside an event is merged with the next one and decoded again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ctda.forking import usable_cpus
from ctda.ingest.chunks import Chunker, Piece, merge
from ctda.ingest.columns import PieceColumns
from ctda.ingest.decode import TOO_DEEP, Decoded, decode_last, decode_piece
from ctda.ingest.errors import TraceError
from ctda.ingest.events import METADATA
from ctda.ingest.pool import DecodePool, ThreadDecodePool, WorkerLost, pool_available, start_pool
from ctda.ingest.source import Framing

Pool = ThreadDecodePool | DecodePool
#: pieces in flight per worker: enough to keep each busy, few enough to bound memory
DEPTH = 2


def decode_pieces(
    chunker: Chunker,
    progress: Callable[[int], None] | None = None,
    parallel: bool = True,
    keep: bool = True,
    sink: Callable[[PieceColumns], None] | None = None,
) -> tuple[list[PieceColumns], bytes]:
    """The columns of every piece in document order, and the document text after the event array.

    ``keep=False`` checks every event the same way but keeps no columns (the list is empty):
    for a caller that needs only the document's framing and metadata, at bounded memory.
    ``sink`` is handed each piece's columns in document order as soon as they are accepted,
    instead of keeping them (the list is empty): for a caller that spills them.
    """
    order = _InOrder(chunker, keep=keep, sink=sink)
    pool: Pool | None = None
    try:
        for piece in chunker.pieces(progress):
            order.add(piece)
            if piece.last:
                order.decode_last_early()  # while the workers finish the rest
                break
            if pool is None and parallel and piece.index == 0 and pool_available():
                # one worker per core but ours: this process decodes too, when the pool is full
                pool = start_pool(max(usable_cpus() - 1, 1), DEPTH, 2 * chunker.chunk_bytes)
            pool = _dispatch(pool, order, piece)
            order.advance()
        while pool is not None and pool.inflight:
            pool = _collect(pool, order, wait=True)
            order.advance()
        order.advance()
    finally:
        if pool is not None:
            pool.close()
    return order.finish()


def _dispatch(pool: Pool | None, order: _InOrder, piece: Piece) -> Pool | None:
    """Queue ``piece`` for the workers, or decode it here when they have enough queued."""
    if pool is None or pool.full:
        order.outcome(piece.index, decode_piece(piece.data))
    else:
        pool.submit(piece.index, piece.data)
    return pool if pool is None else _collect(pool, order, wait=False)


def _collect(pool: Pool, order: _InOrder, wait: bool) -> Pool | None:
    """Move the pool's results into ``order``; if a worker died, redo its pieces here."""
    try:
        for index, decoded in pool.results(wait):
            order.outcome(index, decoded)
    except WorkerLost:
        for index in sorted(pool.inflight):
            order.outcome(index, None)
        pool.close()
        return None
    return pool


@dataclass
class _InOrder:
    """Outcomes of pieces, accepted strictly in document order."""

    chunker: Chunker
    keep: bool = True  # keep each piece's columns (False: check and count only)
    sink: Callable[[PieceColumns], None] | None = None  # takes each piece's columns instead
    pieces: dict[int, Piece] = field(default_factory=dict)  # produced, not yet accepted
    outcomes: dict[int, Decoded] = field(default_factory=dict)
    absorbed: set[int] = field(default_factory=set)  # merged into the piece before them
    tried: dict[int, int] = field(default_factory=dict)  # text length at a merged piece's last decode
    pieces_done: list[PieceColumns] = field(default_factory=list)
    tail: bytes | None = None
    last: tuple[Piece, Decoded, bytes] | None = None  # decoded ahead of its turn
    next: int = 0
    n_events: int = 0

    @property
    def path(self) -> Path:
        return self.chunker.path

    def add(self, piece: Piece) -> None:
        self.pieces[piece.index] = piece

    def outcome(self, index: int, decoded: Decoded | None) -> None:
        """Record a piece's outcome (None: the worker failed on it, so decode it here)."""
        if index in self.absorbed:
            return
        self.outcomes[index] = decoded if decoded is not None else decode_piece(self.pieces[index].data)

    def decode_last_early(self) -> None:
        """Decode the last piece now, overlapping the worker; redone if a merge changes it."""
        piece = self.pieces[max(self.pieces)]
        self.last = (piece, *decode_last(piece.data, self._tail_ok))

    def advance(self) -> None:
        """Accept every outcome that is next in order; merge pieces that end inside an event."""
        while self.tail is None and (piece := self.pieces.get(self.next)) is not None:
            if piece.last:
                if self.last is None or self.last[0] is not piece:  # merged since: redo
                    self.last = (piece, *decode_last(piece.data, self._tail_ok))
                _, decoded, tail = self.last
                self._accept(piece, decoded)
                self.tail = tail
                return
            decoded_or_none = self.outcomes.pop(self.next, None)
            if decoded_or_none is None:
                return  # still being decoded
            if decoded_or_none.ends_inside:
                if not self._merge_next(piece, decoded_or_none):
                    self.outcomes[self.next] = decoded_or_none  # wait for the next piece
                    return
                continue
            self._accept(piece, decoded_or_none)
            self.next += 1
            while self.next in self.absorbed:
                self.next += 1

    def _merge_next(self, piece: Piece, failed: Decoded) -> bool:
        """Glue the following pieces to ``piece``, which ended inside an event.

        It is decoded again only once it has at least doubled since its last decode (or
        reached the end), so an event spanning many pieces costs linear time, not one
        decode of the growing text per piece.
        """
        later = sorted(i for i in self.pieces if i > piece.index)
        if not later:
            return False
        need = 2 * self.tried.get(piece.index, len(piece.text))
        merged = piece
        for index in later:
            following = self.pieces.pop(index)
            self.absorbed.add(following.index)
            self.outcomes.pop(following.index, None)
            merged = merge(merged, following)
            if merged.last or len(merged.text) >= need:
                break
        self.pieces[piece.index] = merged
        # cuts inside one event's strings: the glued text is that event, held whole
        self.chunker.limits.check_unbroken(self.path, len(merged.text) - 2 * self.chunker.chunk_bytes)
        if merged.last:
            return True
        if len(merged.text) >= need:
            self.tried[piece.index] = len(merged.text)
            self.outcomes[piece.index] = decode_piece(merged.data)
        else:
            self.outcomes[piece.index] = failed  # still too short to be worth a decode
        return True

    def _accept(self, piece: Piece, decoded: Decoded) -> None:
        if decoded.columns is None:
            raise TraceError(self.path, self._explain(piece, decoded))
        if self.sink is not None:
            self.sink(decoded.columns)
        elif self.keep:
            self.pieces_done.append(decoded.columns)
        self.n_events += decoded.columns.n
        del self.pieces[piece.index]

    def _explain(self, piece: Piece, decoded: Decoded) -> str:
        if decoded.event >= 0:
            return f"event {self.n_events + decoded.event}: {decoded.problem}"
        if decoded.byte >= 0:
            return f"malformed JSON at byte {piece.offset + decoded.byte - 1}: {decoded.problem}"
        if decoded.ends_inside:
            return (
                decoded.problem if "truncated" in decoded.problem else f"truncated JSON ({decoded.problem})"
            )
        return decoded.problem or "unreadable event array"

    def _tail_ok(self, tail: bytes) -> bool:
        """Whether ``tail`` correctly ends the document after the event array."""
        framing = self.chunker.framing or Framing(head=b"", bare_list=True)
        if framing.bare_list:
            return not tail.strip()
        try:
            METADATA.decode(framing.head + b"[]" + tail)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        except RecursionError:
            raise TraceError(self.path, f"outside the event array: {TOO_DEEP}") from None
        return True

    def finish(self) -> tuple[list[PieceColumns], bytes]:
        if self.tail is None:  # pragma: no cover - the last piece always ends the loop
            raise TraceError(self.path, "internal error: the event array was not fully decoded")
        return self.pieces_done, self.tail
