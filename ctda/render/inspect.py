"""``ctda inspect`` output: one screen of rich tables per :class:`TraceSummary`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ctda.ingest.summary import TraceSummary
from ctda.render.output import NAME_MAX, PIPE_WIDTH, Block, Col, Document, Section, Shown

#: rows shown per section before "… N more"
MAX_ROWS = 10
NAME_WIDTH = 48
#: widest cell of a column that is not the last one
MAX_CELL = 24


def summary_doc(summary: TraceSummary) -> Document:
    """One trace's summary: a hand-laid screen for the table format, plain tables for the rest."""
    s = summary
    threads = sorted(s.cpu_threads, key=lambda t: -t.n_events)
    names = Col("top_names", "top names")
    warnings = sorted(s.warnings.items(), key=lambda kv: -kv[1])
    blocks: list[Block] = [
        _header(s),
        _rows(
            "categories",
            "Events by category",
            [Col("category", "category"), Col("events", "events", "int")],
            list(s.events_by_category.items()),
        ),
        _rows(
            "sync",
            "Synchronization",
            [Col("kind", "kind"), Col("count", "count", "int")],
            list(s.sync.items()),
        ),
        _rows(
            "nccl",
            "NCCL and collectives",
            [Col("where", "where"), Col("name", "name"), Col("count", "count", "int")],
            [
                (where, name, n)
                for where, group in (
                    ("NCCL kernels", s.nccl_kernels),
                    ("NCCL CPU ops", s.nccl_cpu_ops),
                    ("collectives", s.collective_ops),
                )
                for name, n in group.items()
            ],
        ),
        _rows(
            "threads",
            "CPU threads",
            [
                Col("pid", "pid"),
                Col("tid", "tid"),
                Col("thread", "thread"),
                Col("events", "events", "int"),
                Col("busy_ms", "busy ms", "f3"),
                names,
            ],
            [(t.pid, t.tid, t.name, t.n_events, t.busy_ms, _names(t.top_names)) for t in threads],
        ),
        _rows(
            "streams",
            "GPU streams",
            [
                Col("device", "device"),
                Col("stream", "stream"),
                Col("kernels", "kernels", "int"),
                Col("copies", "copies", "int"),
                Col("sets", "sets", "int"),
                Col("syncs", "syncs", "int"),
                Col("busy_ms", "busy ms", "f3"),
                names,
            ],
            [
                (
                    g.device,
                    g.stream,
                    g.n_kernels,
                    g.n_memcpy,
                    g.n_memset,
                    g.n_sync,
                    g.busy_ms,
                    _names(g.top_names),
                )
                for g in s.gpu_streams
            ],
        ),
        _rows(
            "steps",
            "ProfilerSteps",
            [
                Col("step", "step", "int"),
                Col("start_ms", "start ms", "f3"),
                Col("duration_ms", "duration ms", "f3"),
            ],
            [(st.step, st.start_ms, st.dur_ms) for st in s.steps],
        ),
        _rows(
            "warnings",
            "Warnings (odd events, all kept)",
            [Col("what", "what"), Col("count", "count", "int")],
            warnings,
        ),
    ]
    return Document(f"Trace {s.path}", blocks, data=s.to_dict(), source=s.path, screen=lambda c: screen(c, s))


def _rows(name: str, title: str, cols: list[Col], rows: Sequence[Sequence[Any]]) -> Section:
    return Section(name, title, cols, rows)


def _names(top: Sequence[tuple[str, float]]) -> Shown:
    text = ", ".join(
        f"{_short(n, 32)} ({c:,})" if isinstance(c, int) else f"{_short(n, 32)} ({c:,.1f})" for n, c in top
    )
    return Shown([[n, c] for n, c in top], text)


def screen(console: Console, summary: TraceSummary) -> RenderableType:
    """One trace's summary on one screen, fitted to the console's width (a terminal's, or
    unbounded when piped: then the panel is as wide as its content)."""
    width = console.width if console.is_terminal else PIPE_WIDTH
    body = _body(summary, max(width - 4, 40))  # 4: the panel's border and padding
    title = Text(_short(summary.path, NAME_MAX), style="bold")
    return Panel(body, title=title, title_align="left", expand=console.is_terminal)


def _body(s: TraceSummary, width: int) -> RenderableType:
    parts: list[RenderableType] = [_header(s)]
    side = Table.grid(padding=(0, 4))
    side.add_row(_categories(s), Group(_sync(s), _nccl(s, width // 2)))
    parts += [side, _threads(s, width), _streams(s, width), _steps(s)]
    if s.warnings:
        parts.append(_warnings(s, width))
    return Group(*parts)


def _header(s: TraceSummary) -> Text:
    facts = [
        f"{s.n_events:,} events ({s.n_complete:,} complete, {s.n_flows:,} flow)",
        f"{s.n_bytes / 1e6:,.1f} MB JSON",
        f"span {s.span_ms:,.3f} ms",
    ]
    if s.rank is not None or s.world_size is not None:
        backend = f" ({s.backend})" if s.backend else ""
        facts.append(f"rank {_or_dash(s.rank)} of {_or_dash(s.world_size)}{backend}")
    else:
        facts.append("no distributedInfo")
    if s.devices:
        names = sorted(set(s.devices))
        facts.append(f"{len(s.devices)} device(s): {', '.join(names)}")
    fmt = "2020 bare-list format" if s.bare_list else f"schemaVersion {_or_dash(s.schema_version)}"
    facts.append(fmt)
    return Text(" · ".join(facts))


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)


def _section(
    title: str,
    columns: tuple[str, ...],
    rows: Sequence[tuple[str, ...]],
    total: int | None = None,
    width: int = 0,
) -> Group:
    """A titled table. A header starting with "#" is a number (right-aligned). Cells are cut
    with "…" to fit ``width`` (rich would rather drop whole columns): the last column takes
    what the others leave, the others are capped at ``MAX_CELL`` (``NAME_MAX`` when the
    width is unbounded: nothing needs to fit)."""
    cap = NAME_MAX if width >= PIPE_WIDTH // 2 else MAX_CELL
    cells = [(*(_short(c, cap) for c in r[:-1]), r[-1]) for r in rows]
    headers = [c.lstrip("#") for c in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if width:
        # between two columns: a padding cell each side of the box's one-cell divider
        room = min(max(width - sum(widths[:-1]) - 3 * (len(widths) - 1), 8), 2 * NAME_MAX)
        cells = [(*r[:-1], _short(r[-1], room)) for r in cells]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    for header, col in zip(headers, columns, strict=True):
        table.add_column(Text(header), justify="right" if col.startswith("#") else "left", no_wrap=True)
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    if total is not None and total > len(cells):
        table.add_row(Text(f"… {total - len(cells)} more", style="dim"))
    return Group(Text(title, style="bold"), table)


def _categories(s: TraceSummary) -> Group:
    items = list(s.events_by_category.items())
    rows = [(cat or "-", f"{n:,}") for cat, n in items[:MAX_ROWS]]
    return _section("Events by category", ("category", "#events"), rows, len(items))


def _sync(s: TraceSummary) -> RenderableType:
    if not s.sync:
        return Text("No synchronization records or blocking calls.", style="dim")
    return _section("Synchronization", ("kind", "#count"), [(what, f"{n:,}") for what, n in s.sync.items()])


def _nccl(s: TraceSummary, width: int) -> RenderableType:
    if not s.nccl_kernels and not s.nccl_cpu_ops and not s.collective_ops:
        return Text("No NCCL kernels or ops, no collectives.", style="dim")
    groups = (
        ("NCCL kernels", s.nccl_kernels),
        ("NCCL CPU ops", s.nccl_cpu_ops),
        ("collectives", s.collective_ops),
    )
    rows = [(where, f"{sum(names.values()):,}", next(iter(names), "-")) for where, names in groups]
    return _section("NCCL and collectives", ("", "#count", "most frequent"), rows, width=width)


def _short(name: str, width: int = NAME_WIDTH) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _threads(s: TraceSummary, width: int) -> RenderableType:
    if not s.cpu_threads:
        return Text("No CPU threads.", style="dim")
    threads = sorted(s.cpu_threads, key=lambda t: -t.n_events)
    rows = [
        (
            f"{t.pid}/{t.tid}",
            t.name,
            f"{t.n_events:,}",
            f"{t.busy_ms:,.1f}",
            ", ".join(f"{_short(n, 32)} ({c:,})" for n, c in t.top_names),
        )
        for t in threads[:MAX_ROWS]
    ]
    columns = ("pid/tid", "thread", "#events", "#busy ms", "top names")
    return _section("CPU threads", columns, rows, len(threads), width)


def _streams(s: TraceSummary, width: int) -> RenderableType:
    if not s.gpu_streams:
        return Text("No GPU streams.", style="dim")
    rows = [
        (
            f"{_or_dash(g.device)}/{_or_dash(g.stream)}",
            f"{g.n_kernels:,}",
            f"{g.n_memcpy:,}",
            f"{g.n_memset:,}",
            f"{g.n_sync:,}",
            f"{g.busy_ms:,.1f}",
            ", ".join(f"{_short(n, 32)} ({ms:,.1f})" for n, ms in g.top_names),
        )
        for g in s.gpu_streams[:MAX_ROWS]
    ]
    columns = ("device/stream", "#kernels", "#copies", "#sets", "#syncs", "#busy ms", "top names")
    return _section("GPU streams", columns, rows, len(s.gpu_streams), width)


def _steps(s: TraceSummary) -> RenderableType:
    if not s.steps:
        return Text("No ProfilerStep#N spans.", style="dim")
    durations = sorted(st.dur_ms for st in s.steps)
    title = f"{len(s.steps)} ProfilerSteps (median {durations[len(durations) // 2]:,.2f} ms)"
    rows = [(f"#{st.step}", f"{st.start_ms:,.2f}", f"{st.dur_ms:,.2f}") for st in s.steps[:MAX_ROWS]]
    return _section(title, ("step", "#start ms", "#duration ms"), rows, len(s.steps))


def _warnings(s: TraceSummary, width: int) -> RenderableType:
    rows = [(f"{n:,}", what) for what, n in sorted(s.warnings.items(), key=lambda kv: -kv[1])]
    return _section("Warnings (odd events, all kept)", ("#count", "what"), rows, width=width)
