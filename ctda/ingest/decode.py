"""Stage 2b: one piece of event-array text -> its columns, or why it could not be.

This is the unit of work a decode worker runs, so its result is a small picklable value
rather than an exception: the caller decides, in document order, whether a failure is a
cut to undo (see :mod:`ctda.ingest.chunks`) or a problem with the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from ctda.ingest import native
from ctda.ingest.columns import ChunkProblem, PieceColumns, piece_columns
from ctda.ingest.events import EVENT_LIST

_BYTE = re.compile(r"\(byte (\d+)\)")
#: a JSON string (escapes included), a bracket or a comma
_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{},]')
#: elements nested deeper than this are decoded alone to find the one nested too deeply
_SUSPECT = 100
#: msgspec refuses nesting deeper than the interpreter's recursion limit (about 1,000)
TOO_DEEP = "JSON nested too deeply (more than about 1,000 levels of objects or arrays)"


@dataclass
class Decoded:
    """The outcome of decoding one piece: its columns, or a problem at an event or a byte."""

    columns: PieceColumns | None = None
    #: the text is not a list of whole events: it ends inside one (or the file is truncated)
    ends_inside: bool = False
    event: int = -1  # index within the piece of the event a problem is about
    byte: int = -1  # offset within the piece's text of a syntax error
    problem: str = ""


def decode_piece(text: bytes | memoryview) -> Decoded:
    """Decode ``[ev, ..., ev]`` into raw columns (natively when the extension can)."""
    columns = native.piece_columns(text)
    if columns is not None:
        return Decoded(columns=columns)
    try:
        events = EVENT_LIST.decode(text)
    except msgspec.ValidationError as exc:
        return _invalid(exc)
    except msgspec.DecodeError as exc:
        return _malformed(exc, len(text))
    except RecursionError:
        return too_deep(text)
    try:
        return Decoded(columns=piece_columns(events, text))
    except ChunkProblem as exc:
        return Decoded(event=exc.index, problem=exc.problem)


def decode_last(text: bytes, tail_ok: Callable[[bytes], bool]) -> tuple[Decoded, bytes]:
    """Decode the final piece, which runs past the array's ``]`` to the document's end.

    Candidate closing brackets are tried from the end; one qualifies when the text after
    it completes the document (``tail_ok``) and the text before it decodes. Returns the
    outcome and the document text after the array.
    """
    pos = len(text)
    while (pos := text.rfind(b"]", 1, pos)) >= 0:
        tail = text[pos + 1 :]
        if not tail_ok(tail):
            continue
        decoded = decode_piece(text[: pos + 1])
        if not decoded.ends_inside and decoded.byte < 0:
            return decoded, tail
    return _never_closed(text), b""


def _never_closed(text: bytes) -> Decoded:
    """Explain why no closing bracket worked: truncation, or a syntax error somewhere."""
    try:
        EVENT_LIST.decode(text)
    except RecursionError:
        return too_deep(text)
    except msgspec.ValidationError as exc:
        return _invalid(exc)
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "trailing characters" in msg:  # the array itself is fine
            m = _BYTE.search(msg)
            return Decoded(byte=int(m.group(1)) if m else 0, problem="invalid text after the event array")
        found = _malformed(exc, len(text) + 1)
        if found.byte >= 0:
            return found
    return Decoded(ends_inside=True, problem="truncated JSON: the event array is never closed")


def too_deep(text: bytes | memoryview) -> Decoded:
    """Which event of ``[ev, ..., ev]`` is nested too deeply: msgspec says only that one is.

    Walks the piece's strings and brackets, counting the array's elements, and decodes
    each element nested deeper than ``_SUSPECT`` levels alone until one fails the same
    way (only an error's path runs this: a Python pass over the piece).
    """
    data = bytes(text)
    depth = index = start = deepest = 0
    for m in _TOKEN.finditer(data):
        c = data[m.start()]
        if c in b"[{":
            depth += 1
            if depth == 2:  # an element of the event array opens
                start, deepest = m.start(), 2
            deepest = max(deepest, depth)
        elif c in b"]}":
            if depth == 2 and deepest > _SUSPECT:
                try:
                    msgspec.json.decode(data[start : m.end()])
                except RecursionError:
                    return Decoded(event=index, problem=TOO_DEEP)
                except msgspec.DecodeError:
                    pass
            depth -= 1
        elif c == ord(",") and depth == 1:
            index += 1
    return Decoded(event=0, problem=TOO_DEEP)  # pragma: no cover - msgspec found one


def _invalid(exc: msgspec.ValidationError) -> Decoded:
    """Turn msgspec's ``$[12].ts`` path into (event 12, "field ts: ...")."""
    msg = str(exc)
    text, sep, at = msg.partition(" - at `$[")
    if not sep:
        return Decoded(event=0, problem=f"wrong field type: {msg}")
    idx, _, rest = at.partition("]")
    field = rest.rstrip("`").lstrip(".")
    where = f"field {field}" if field else "the event itself"
    return Decoded(event=int(idx), problem=f"{where}: {text}")


def _malformed(exc: msgspec.DecodeError, length: int) -> Decoded:
    """Whether a syntax error means the piece was cut in the wrong place, or is real.

    At the last byte, the piece ends inside an event. "Trailing characters" means the
    array closed inside the piece: the cut fell in the document's text after the array.
    Either way the piece is merged with the next; errors anywhere else are real.
    """
    msg = str(exc)
    m = _BYTE.search(msg)
    if (
        "truncated" in msg.lower()
        or "trailing characters" in msg
        or m is None
        or int(m.group(1)) >= length - 1
    ):
        return Decoded(ends_inside=True, problem=msg)
    problem = _BYTE.sub("", msg).replace("JSON is malformed:", "").strip()
    return Decoded(byte=int(m.group(1)), problem=problem)
