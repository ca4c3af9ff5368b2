"""Render a :class:`ctda.analysis.report.Report` as rich tables, Markdown or JSON."""

from __future__ import annotations

import json

import pandas as pd
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ctda.analysis.report import Report


def ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def pct(x: float) -> str:
    return f"{x:.1%}"


def _table(title: str, df: pd.DataFrame, cols: list[tuple[str, str, str]]) -> Table:
    """cols: (column, header, format) with format in {"ms", "pct", "int", "str"}."""
    t = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for _, header, fmt in cols:
        t.add_column(header, justify="left" if fmt == "str" else "right", overflow="ellipsis", no_wrap=True)
    for row in df.to_dict(orient="records"):
        t.add_row(*[_fmt(row[c], f) for c, _, f in cols])
    return t


def _fmt(v: object, fmt: str) -> str:
    if fmt == "ms":
        return ms(float(v))  # type: ignore[arg-type]
    if fmt == "pct":
        return pct(float(v))  # type: ignore[arg-type]
    if fmt == "int":
        return f"{int(v):,}"  # type: ignore[call-overload]
    return shorten(str(v))


def shorten(text: str, limit: int = 72) -> str:
    """Kernel names run to hundreds of characters; keep the head, which names them."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


HOT_COLS = [
    ("name", "name", "str"),
    ("category", "category", "str"),
    ("cp_ns", "CP ms", "ms"),
    ("cp_share", "% of CP", "pct"),
    ("total_ns", "self ms", "ms"),
    ("total_share", "% of time", "pct"),
    ("count", "count", "int"),
    ("on_cp", "on CP", "int"),
]
STEP_COLS = [
    ("window", "window", "str"),
    ("start_ms", "start ms", "str"),
    ("duration_ns", "duration ms", "ms"),
    ("cp_ns", "CP ms", "ms"),
    ("bound_by", "bound by", "str"),
    ("bound_by_share", "share", "pct"),
]


def render_table(r: Report, console: Console) -> None:
    """The terminal report."""
    head = Text.assemble(
        ("critical path ", "bold"),
        (f"{ms(r.total_ns)} ms", "bold cyan"),
        f" over {len(r.steps)} window(s) of {r.trace}  ",
        (f"[mode {r.options['mode']}, cross-thread: {','.join(r.options['cross_thread']) or 'none'}]", "dim"),
    )
    parts: list[object] = [head]
    parts.append(
        _table("Per window", r.steps.assign(start_ms=r.steps.start_ms.map(lambda x: f"{x:,.3f}")), STEP_COLS)
    )
    parts.append(
        _table(
            "Bound by",
            r.by_class,
            [("class", "class", "str"), ("cp_ns", "CP ms", "ms"), ("share", "% of CP", "pct")],
        )
    )
    parts.append(_table("Top hotspots (time on the critical path)", r.hotspots, HOT_COLS))
    parts.append(
        _table(
            "By thread / stream",
            r.by_lane.head(8),
            [("lane", "lane", "str"), ("cp_ns", "CP ms", "ms"), ("share", "% of CP", "pct")],
        )
    )
    if len(r.near_critical):
        parts.append(
            _table(
                "Near-critical events (off the path, least slack)",
                r.near_critical,
                [
                    ("name", "name", "str"),
                    ("slack_ns", "slack ms", "ms"),
                    ("duration_ns", "duration ms", "ms"),
                    ("lane", "lane", "str"),
                ],
            )
        )
    if r.recommendations:
        parts.append(Text("Recommendations", style="bold"))
        parts.extend(Text(f"  - {x}") for x in r.recommendations)
    c = r.checks
    parts.append(
        Text(
            f"checks: replay within 1us {c['replay_within_1us']:.4%} of {c['nodes']:,} nodes; "
            f"CP vs window max error {c['cp_vs_window_max_rel_error']:.2e}",
            style="dim",
        )
    )
    console.print(Group(*parts))  # type: ignore[arg-type]


def _md_table(df: pd.DataFrame, cols: list[tuple[str, str, str]]) -> str:
    lines = ["| " + " | ".join(h for _, h, _ in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.to_dict(orient="records"):
        lines.append("| " + " | ".join(_fmt(row[c], f).replace("|", "\\|") for c, _, f in cols) + " |")
    return "\n".join(lines)


def render_markdown(r: Report) -> str:
    out = [
        f"# Critical path of `{r.trace}`",
        "",
        f"Critical path **{ms(r.total_ns)} ms** over {len(r.steps)} window(s); mode {r.options['mode']}, "
        f"cross-thread rules: {', '.join(r.options['cross_thread']) or 'none'}.",
        "",
        "## Per window",
        _md_table(r.steps.assign(start_ms=r.steps.start_ms.map(lambda x: f"{x:,.3f}")), STEP_COLS),
        "",
        "## Bound by",
        _md_table(
            r.by_class, [("class", "class", "str"), ("cp_ns", "CP ms", "ms"), ("share", "% of CP", "pct")]
        ),
        "",
        "## Top hotspots",
        _md_table(r.hotspots, HOT_COLS),
        "",
        "## By thread / stream",
        _md_table(
            r.by_lane, [("lane", "lane", "str"), ("cp_ns", "CP ms", "ms"), ("share", "% of CP", "pct")]
        ),
    ]
    if r.recommendations:
        out += ["", "## Recommendations", *[f"- {x}" for x in r.recommendations]]
    return "\n".join(out) + "\n"


def render_json(r: Report) -> str:
    return json.dumps(r.to_dict(), indent=2, default=str)
