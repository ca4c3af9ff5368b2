"""The output module's contracts, and names megabytes long (clipped in tables, whole in json/csv)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from ctda.render.output import (
    ELLIPSIS,
    NAME_MAX,
    Bullets,
    Col,
    Document,
    Format,
    Section,
    Shown,
    clip,
    emit,
    emit_each,
    rich_table,
)
from tests import synth

#: a name as long as the one that made rendering take minutes
LONG = "void kernel<" + "float, " * 600_000 + ">"  # 4.2 MB


def _doc(name: str = "aten::mm", source: str = "t.json") -> Document:
    hot = Section(
        "hotspots",
        "Top hotspots",
        [Col("name", "name"), Col("cp_ns", "CP ms", "ms"), Col("share", "% of CP", "pct")],
        [(name, 1_500_000, 0.25), ("a|b\nc", 2_000, 0.5)],
    )
    steps = Section(
        "steps", "Per window", [Col("window", "window"), Col("n", "events", "int")], [("w", 1234)]
    )
    return Document(
        "Report", [Text("head"), steps, hot, Bullets("Advice", [f"speed up {name}"])], source=source
    )


def _render(doc: Document, fmt: Format) -> str:
    buf = io.StringIO()
    emit(doc, fmt, out=buf)
    return buf.getvalue()


def test_clip_bounds_length_and_marks_the_cut() -> None:
    assert clip("short") == "short"
    assert clip("x" * NAME_MAX) == "x" * NAME_MAX
    cut = clip("x" * (NAME_MAX + 1))
    assert len(cut) == NAME_MAX and cut.endswith(ELLIPSIS) and cut.startswith("x" * (NAME_MAX - 1))


def test_table_format_formats_cells_and_keeps_headers() -> None:
    text = _render(_doc(), Format.table)
    assert "1.500" in text and "25.0%" in text and "1,234" in text
    for header in ("name", "CP ms", "% of CP", "window", "events"):
        assert header in text
    assert "  - speed up aten::mm" in text and ELLIPSIS not in text


def test_markdown_escapes_pipes_and_newlines() -> None:
    md = _render(_doc(), Format.md)
    assert "| name | CP ms | % of CP |" in md and "|---|---:|---:|" in md
    assert "| a\\|b c | 0.002 | 50.0% |" in md
    assert "## Advice" in md and "- speed up aten::mm" in md


def test_csv_stacks_sections_with_raw_values() -> None:
    rows = list(csv.DictReader(io.StringIO(_render(_doc(), Format.csv))))
    assert list(rows[0]) == ["table", "window", "n", "name", "cp_ns", "share"]
    assert rows[0] == {"table": "steps", "window": "w", "n": "1234", "name": "", "cp_ns": "", "share": ""}
    assert rows[1]["name"] == "aten::mm" and rows[1]["cp_ns"] == "1500000" and rows[1]["share"] == "0.25"
    assert rows[2]["name"] == "a|b\nc"


def test_csv_of_several_documents_names_their_source() -> None:
    one = Document("x", [Section("s", "S", [Col("k", "K")], [(1,)])], source="a.json")
    two = Document("y", [Section("s", "S", [Col("k", "K")], [(2,)])], source="b.json")
    buf = io.StringIO()
    emit_each(iter([one, two]), Format.csv, out=buf)
    assert buf.getvalue().splitlines() == ["source,k", "a.json,1", "b.json,2"]


def test_json_is_the_data_or_the_sections() -> None:
    assert json.loads(_render(Document("d", [], data={"a": 1}), Format.json)) == {"a": 1}
    got = json.loads(_render(_doc(), Format.json))
    assert got["steps"] == [{"window": "w", "n": 1234}]
    assert got["hotspots"][0] == {"name": "aten::mm", "cp_ns": 1_500_000, "share": 0.25}
    shown = Document("d", [Section("s", "S", [Col("v", "V")], [(Shown([1, 2], "1 and 2"),)])])
    assert json.loads(_render(shown, Format.json)) == [{"v": [1, 2]}]
    assert "1 and 2" in _render(shown, Format.table)


def test_a_megabyte_name_is_clipped_in_tables_and_whole_in_json_and_csv() -> None:
    doc = _doc(LONG)
    for fmt in (Format.table, Format.md):
        text = _render(doc, fmt)
        assert len(text) < 5_000, fmt  # the name is shown by its head
        assert clip(LONG) in text and LONG not in text
    assert json.loads(_render(doc, Format.json))["hotspots"][0]["name"] == LONG
    limit = csv.field_size_limit(1 << 30)  # Python's reader stops at 128 KB fields by default
    try:
        (row,) = [r for r in csv.DictReader(io.StringIO(_render(doc, Format.csv))) if r["name"] == LONG]
    finally:
        csv.field_size_limit(limit)
    assert row["cp_ns"] == "1500000"


def test_a_megabyte_event_name_through_the_cli(tmp_path: Path) -> None:
    """analyze and inspect, piped: the report is a few KB with the name clipped; json keeps it."""
    trace = synth.write(
        tmp_path / "long.json",
        [
            synth.cpu("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            synth.cpu(LONG, 10, 900),
        ],
    )

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ctda.cli.app", *args, str(trace)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    table = run("analyze")
    assert "critical path 1.000 ms over 1 window(s)" in table
    assert len(table) < 20_000 and clip(LONG) in table and LONG not in table
    report = json.loads(run("analyze", "--format", "json"))
    (hot,) = [h for h in report["hotspots"] if h["name"] == LONG]
    assert hot["cp_ns"] == 900_000  # its own 900 µs, all on the path
    assert all(len(r) < 1_000 for r in report["recommendations"])
    shown = run("inspect")
    assert len(shown) < 20_000 and "2 events" in shown


def test_a_narrow_terminal_cuts_names_not_headers_or_numbers() -> None:
    """At 72 columns the text columns give up room; every header and number stays whole."""
    cols = [
        Col("name", "name"),
        Col("category", "category"),
        Col("cp_ns", "CP ms", "ms"),
        Col("share", "% of CP", "pct"),
        Col("count", "count", "int"),
        Col("lane", "lane"),
    ]
    rows = [("void kernel<" + "T, " * 40 + ">", "kernel", 12_345_678, 0.5, 1234, "GPU 0 stream 7")]
    buf = io.StringIO()
    Console(file=buf, width=72).print(rich_table(Section("hot", "Hot", cols, rows), 72))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 72
    header, body = lines[1], lines[3]
    assert [h.strip() for h in header.split("┃")] == [c.header for c in cols]
    cells = [c.strip() for c in body.split("│")]
    assert cells[0].startswith("void kernel<T,") and cells[0].endswith(ELLIPSIS)
    assert cells[1:] == ["kernel", "12.346", "50.0%", "1,234", "GPU 0 stream 7"]
