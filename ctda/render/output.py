"""The one way out of every command: a :class:`Document` printed in the chosen :class:`Format`.

A command builds a document (text lines, titled tables, bullet lists, and the JSON payload)
and hands it to :func:`emit`. Contracts:

- ``table``: rich tables on stdout. In a terminal they fit its width; anywhere else (a
  pipe, a file, a CI log) nothing is cut: the console is as wide as the widest line.
- ``md``: the same tables as GitHub Markdown.
- ``json``: the command's data (``Document.data``), or the tables as lists of records.
- ``csv``: the tables' raw values (nanoseconds, fractions) under their machine names. A
  document of several tables gets a leading ``table`` column naming each row's table;
  several documents (one per trace) a leading ``source`` column.

Names are clipped to :data:`NAME_MAX` characters with an ellipsis in ``table`` and ``md``
(an event name can be megabytes long, and laying out such a cell costs far more than the
report); ``json`` and ``csv`` keep every name whole.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ctda.errors import CtdaError

if TYPE_CHECKING:
    import pandas as pd

# numpy is never imported here: the command line imports this module to build its help, and
# renders stored runs and query rows (plain Python values) without the engine; a value is
# numpy's only once the library has loaded numpy anyway (see _numpy_is)


class Format(str, Enum):
    """Output formats, shared by every command that prints a table."""

    table = "table"
    md = "md"
    json = "json"
    csv = "csv"


#: longest name shown in a table cell or a line of text (table and md formats)
NAME_MAX = 120
#: console width when stdout is not a terminal: wide enough that no table is ever cut
PIPE_WIDTH = 1 << 20
ELLIPSIS = "…"
#: width at which a table wraps sentences
PROSE_WIDTH = 70


#: control characters (C0, DEL, C1) and bidi overrides: a name must not drive the terminal
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` escapes, line breaks and tabs as
    spaces (names from a store or a trace can hold anything)."""
    return UNPRINTABLE.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    # line breaks and tabs inside a name read as spaces; the rest could drive the terminal
    c = m.group()
    return " " if c in "\t\n\r" else f"\\x{ord(c):02x}"


def clip(text: str, limit: int = NAME_MAX) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when anything was cut,
    its control characters made visible."""
    return visible(text if len(text) <= limit else text[: limit - 1] + ELLIPSIS)


@dataclass(frozen=True)
class Shown:
    """A cell whose raw value (json, csv) differs from what a reader sees (table, md)."""

    value: Any
    text: str


@dataclass(frozen=True)
class Col:
    """A table column: ``key`` names it in json and csv, ``header`` in table and md.

    ``kind`` formats its cells for reading: ``ms`` (nanoseconds shown as milliseconds),
    ``mb`` (bytes shown as megabytes),
    ``pct`` (a fraction), ``int``, ``f3`` (three decimals), ``num`` (any number), ``str``
    (text, clipped), ``prose`` (sentences, wrapped) or ``cell``
    (anything a query returns: numbers, text, lists, maps, null).
    """

    key: str
    header: str
    kind: str = "str"

    @property
    def numeric(self) -> bool:
        return self.kind in ("ms", "mb", "pct", "int", "f3", "num")


@dataclass
class Section:
    """A titled table: ``rows`` hold raw values in column order."""

    name: str
    title: str
    cols: list[Col]
    rows: Sequence[Sequence[Any]]

    @classmethod
    def of(cls, name: str, title: str, frame: pd.DataFrame, cols: Sequence[Col]) -> Section:
        """The columns ``cols`` (by key) of ``frame``."""
        keys = [c.key for c in cols]
        rows = list(frame[keys].itertuples(index=False, name=None)) if len(frame) else []
        return cls(name, title, list(cols), rows)


@dataclass
class Bullets:
    """A titled list of sentences (recommendations, moved events)."""

    title: str
    items: list[str]


Block = Text | Section | Bullets


@dataclass
class Document:
    """What a command prints: blocks in order, a Markdown title, and the JSON payload."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    data: Any = None  # the json output; None: the sections as records
    source: str = ""  # names the document in csv output of several documents
    #: a hand-laid screen for the table format, fitted to the console it is given
    screen: Callable[[Console], RenderableType] | None = None

    def sections(self) -> list[Section]:
        return [b for b in self.blocks if isinstance(b, Section)]


def stdout_console() -> Console:
    """A console on the current stdout: the terminal's width, or unbounded when piped."""
    stream = sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return Console(file=stream, width=None if tty else PIPE_WIDTH, highlight=False)


def emit(doc: Document, fmt: Format, out: TextIO | None = None) -> None:
    """Print one document in ``fmt`` on ``out`` (default: stdout)."""
    _write([doc], fmt, many=False, out=out)


def emit_each(docs: Iterable[Document], fmt: Format, out: TextIO | None = None) -> None:
    """Print documents as they come (table, md), or as one list / one CSV once all came."""
    if fmt in (Format.table, Format.md):
        for doc in docs:
            _write([doc], fmt, many=False, out=out)
        return
    _write(list(docs), fmt, many=True, out=out)


def _write(docs: list[Document], fmt: Format, many: bool, out: TextIO | None) -> None:
    """Write ``docs``; a failed write (a full disk, an I/O error) is a :class:`CtdaError`,
    one line for the user. A reader that went away (``| head``) is not an error here: the
    ``BrokenPipeError`` goes up as it is."""
    try:
        _write_docs(docs, fmt, many, out)
    except BrokenPipeError:
        raise
    except OSError as exc:
        if out is None:  # what stdout still buffers would fail again at exit
            _stdout_to_null()
        where = "stdout" if out is None else getattr(out, "name", "the output")
        raise CtdaError(f"cannot write to {where} ({exc.strerror or exc})") from None


def _stdout_to_null() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _write_docs(docs: list[Document], fmt: Format, many: bool, out: TextIO | None) -> None:
    stream = out if out is not None else sys.stdout
    if fmt is Format.table:
        console = stdout_console() if out is None else Console(file=out, width=PIPE_WIDTH, highlight=False)
        for doc in docs:
            if doc.screen is not None:
                console.print(doc.screen(console))
                continue
            for block in doc.blocks:
                console.print(rich_block(block, console.width))
        return
    if fmt is Format.md:
        text = "\n".join(markdown(doc) for doc in docs)
    elif fmt is Format.json:
        payload = [json_data(d) for d in docs] if many else json_data(docs[0])
        text = json.dumps(payload, indent=2, default=_json_default) + "\n"
    else:
        text = csv_text(docs)
    stream.write(text)
    stream.flush()


# --- table ----------------------------------------------------------------------------
#: what a table with no rows shows under its headers (table and md formats)
EMPTY = "none"


def rich_block(block: Block, width: int = PIPE_WIDTH) -> Any:
    """A block as a rich renderable for a console ``width`` wide."""
    if isinstance(block, Text):
        return _clip_text(block)
    if isinstance(block, Bullets):
        lines = Text(block.title, style="bold")
        for item in block.items:
            lines.append("\n  - " + clip(item, NAME_MAX * 4))
        return lines
    return rich_table(block, width)


def _clip_text(text: Text) -> Text:
    # a line that names events can be as long as they are: rich lays out long lines slowly
    return text if len(text) <= NAME_MAX * 8 else text[: NAME_MAX * 8 - 1] + Text(ELLIPSIS)


def rich_table(section: Section, width: int = PIPE_WIDTH) -> Table:
    """A section as a rich table at most ``width`` wide, headers and numbers never cut.

    When the table is too wide, its text columns give up the room, in proportion to their
    width (their cells end in an ellipsis); rich left alone would cut headers instead, or
    drop whole columns.
    """
    cols = section.cols
    cells = [[shown(v, c) for v, c in zip(row, cols, strict=True)] for row in section.rows]
    caps = _text_caps(cols, cells, width)
    t = Table(title=section.title, title_justify="left", show_edge=False, header_style="bold")
    if not cells:  # a table with no rows says so, rather than show headers over nothing
        t.caption, t.caption_justify = EMPTY, "left"
    for c, cap in zip(cols, caps, strict=True):
        prose = c.kind == "prose"
        t.add_column(
            c.header,
            justify="right" if c.numeric else "left",
            overflow="fold" if prose else "ellipsis",
            no_wrap=not prose,
            max_width=cap,
        )
    for row in cells:
        t.add_row(*(Text(c) for c in row))  # cells are data, never markup
    return t


def _text_caps(cols: Sequence[Col], cells: Sequence[Sequence[str]], width: int) -> list[int | None]:
    """Per column, the widest it may be so the table fits ``width`` (None: no cap)."""
    natural = [max([len(c.header), *(len(r[i]) for r in cells)]) for i, c in enumerate(cols)]
    for i, c in enumerate(cols):
        if c.kind == "prose":
            natural[i] = min(natural[i], PROSE_WIDTH)
    # each column is padded by one cell either side, and columns are one divider apart
    overhead = 3 * len(cols) - 1
    if sum(natural) + overhead <= width:
        return [PROSE_WIDTH if c.kind == "prose" else None for c in cols]
    text = sorted((i for i, c in enumerate(cols) if not c.numeric), key=lambda i: natural[i])
    room = width - overhead - sum(w for i, w in enumerate(natural) if i not in text)
    caps: list[int | None] = [None] * len(cols)
    # narrow columns keep their width; the wide ones share what is left equally
    for k, i in enumerate(text):
        fair = room // (len(text) - k)
        cap = max(len(cols[i].header), 4, min(natural[i], fair))
        caps[i] = cap
        room -= cap
    return caps


def shown(value: Any, col: Col) -> str:
    """A cell as a reader sees it (table and md)."""
    if isinstance(value, Shown):
        return clip(value.text)
    kind = col.kind
    if value is None or (isinstance(value, float) and math.isnan(value) and kind != "cell"):
        return ""
    if kind == "ms":
        return f"{float(value) / 1e6:,.3f}"
    if kind == "mb":
        return f"{float(value) / 1e6:,.1f}"
    if kind == "pct":
        return f"{float(value):.1%}"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "f3":
        return f"{float(value):,.3f}"
    if kind in ("num", "cell"):
        if isinstance(value, float) or _numpy_is(value, "floating"):
            return f"{float(value):.6g}"
        if isinstance(value, (dict, list)):
            return clip(json.dumps(value, default=str))
    return clip(str(value), NAME_MAX * 8 if kind == "prose" else NAME_MAX)


# --- md ----------------------------------------------------------------------------------
def markdown(doc: Document) -> str:
    """A document as GitHub Markdown."""
    out = [f"# {_md_escape(clip(doc.title, NAME_MAX * 2))}"] if doc.title else []
    for block in doc.blocks:
        out.append("")
        if isinstance(block, Text):
            out.append(_md_escape(_clip_text(block).plain))
        elif isinstance(block, Bullets):
            out += [f"## {block.title}", "", *(f"- {_md_escape(clip(i, NAME_MAX * 4))}" for i in block.items)]
        else:
            out += [f"## {block.title}", "", markdown_table(block)]
    return "\n".join(out) + "\n"


def markdown_table(section: Section) -> str:
    cols = section.cols
    lines = [
        "| " + " | ".join(c.header for c in cols) + " |",
        "|" + "|".join("---:" if c.numeric else "---" for c in cols) + "|",
    ]
    for row in section.rows:
        cells = (_md_escape(shown(v, c)).replace("|", "\\|") for v, c in zip(row, cols, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    if not section.rows:
        lines += ["", EMPTY]
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


# --- json ---------------------------------------------------------------------------------
def json_data(doc: Document) -> Any:
    """The document's JSON payload: its data, else its sections as records."""
    if doc.data is not None:
        return doc.data
    sections = doc.sections()
    if len(sections) == 1:
        return records(sections[0])
    return {s.name: records(s) for s in sections}


def records(section: Section) -> list[dict[str, Any]]:
    keys = [c.key for c in section.cols]
    return [{k: _raw(v) for k, v in zip(keys, row, strict=True)} for row in section.rows]


def _numpy_is(value: Any, kind: str) -> bool:
    """Whether ``value`` is a numpy ``kind`` (``np.generic``, ``np.ndarray``...). Only a
    process that loaded numpy can hold one, so a listing of stored runs never imports it."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, getattr(np, kind))


def _raw(value: Any) -> Any:
    value = value.value if isinstance(value, Shown) else value
    if _numpy_is(value, "generic"):
        return value.item()
    return value


def _json_default(value: Any) -> Any:
    if _numpy_is(value, "generic"):
        return value.item()
    if _numpy_is(value, "ndarray"):
        return value.tolist()
    return str(value)


# --- csv ------------------------------------------------------------------------------------
def csv_text(docs: Sequence[Document]) -> str:
    """Every section of every document as one CSV (see the module's contract)."""
    sections = [(d, s) for d in docs for s in d.sections()]
    with_source = len(docs) > 1
    with_table = len({s.name for _, s in sections}) > 1 or any(len(d.sections()) > 1 for d in docs)
    keys: list[str] = []
    for _, s in sections:
        keys += [c.key for c in s.cols if c.key not in keys]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*(["source"] if with_source else []), *(["table"] if with_table else []), *keys])
    for doc, s in sections:
        lead = [*([doc.source] if with_source else []), *([s.name] if with_table else [])]
        at = {c.key: i for i, c in enumerate(s.cols)}
        for row in s.rows:
            w.writerow([*lead, *(_csv_cell(row[at[k]]) if k in at else "" for k in keys)])
    return buf.getvalue()


def _csv_cell(value: Any) -> Any:
    value = _raw(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=_json_default)
    return "" if value is None else value
