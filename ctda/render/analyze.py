"""A :class:`ctda.analysis.report.Report` as a printable :class:`Document` (any format)."""

from __future__ import annotations

from rich.text import Text

from ctda.analysis.report import Report
from ctda.render.output import Block, Bullets, Col, Document, Section


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def pct(x: float) -> str:
    return f"{x:.1%}"


HOT_COLS = [
    Col("name", "name"),
    Col("category", "category"),
    Col("cp_ns", "CP ms", "ms"),
    Col("cp_share", "% of CP", "pct"),
    Col("total_ns", "self ms", "ms"),
    Col("total_share", "% of time", "pct"),
    Col("count", "count", "int"),
    Col("on_cp", "on CP", "int"),
]
STEP_COLS = [
    Col("window", "window"),
    Col("start_ms", "start ms", "f3"),
    Col("duration_ns", "duration ms", "ms"),
    Col("cp_ns", "CP ms", "ms"),
    Col("bound_by", "bound by"),
    Col("bound_by_share", "share", "pct"),
]
CLASS_COLS = [Col("class", "class"), Col("cp_ns", "CP ms", "ms"), Col("share", "% of CP", "pct")]
LANE_COLS = [Col("lane", "lane"), Col("cp_ns", "CP ms", "ms"), Col("share", "% of CP", "pct")]
NEAR_COLS = [
    Col("name", "name"),
    Col("slack_ns", "slack ms", "ms"),
    Col("duration_ns", "duration ms", "ms"),
    Col("lane", "lane"),
]


def report_doc(r: Report, lanes: int = 8) -> Document:
    """The report's tables; ``lanes`` bounds the thread/stream table of the table format."""
    head = Text.assemble(
        ("critical path ", "bold"),
        (f"{ms(r.total_ns)} ms", "bold cyan"),
        f" over {len(r.steps)} window(s) of {r.trace}  ",
        (f"[mode {r.options['mode']}, cross-thread: {','.join(r.options['cross_thread']) or 'none'}]", "dim"),
    )
    blocks: list[Block] = [
        head,
        Section.of("steps", "Per window", r.steps, STEP_COLS),
        Section.of("bound_by", "Bound by", r.by_class, CLASS_COLS),
        Section.of("hotspots", "Top hotspots (time on the critical path)", r.hotspots, HOT_COLS),
        Section.of("by_thread_or_stream", "By thread / stream", r.by_lane.head(lanes), LANE_COLS),
    ]
    if len(r.near_critical):
        blocks.append(
            Section.of(
                "near_critical",
                "Near-critical events (off the path, least slack)",
                r.near_critical,
                NEAR_COLS,
            )
        )
    if r.recommendations:
        blocks.append(Bullets("Recommendations", list(r.recommendations)))
    c = r.checks
    blocks.append(
        Text(
            f"checks: replay within 1us {c['replay_within_1us']:.4%} of {c['nodes']:,} nodes; "
            f"CP vs window max error {c['cp_vs_window_max_rel_error']:.2e}",
            style="dim",
        )
    )
    return Document(f"Critical path of {r.trace}", blocks, data=r.to_dict(), source=r.trace)
