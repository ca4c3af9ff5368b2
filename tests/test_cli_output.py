"""Every command that prints a table, in every format, with stdout redirected to a pipe.

Each command runs in-process through typer's ``CliRunner``, whose stdout is no terminal: the
same pipe-width console ``ctda ... | less`` or a CI log gets. One command per format also runs
as its own process (``python -m ctda.cli.app``) with stdout a pipe and must print the same
bytes. In the table format no header may be cut and no column may be empty; md has every
header; json parses; csv starts with its header row.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from ctda.cli.app import app, register
from tests.conftest import CORPUS, DATA

TRACE = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"
BASE = DATA / "hta" / "trace_compare_base_tiny.json.gz"
TEST = DATA / "hta" / "trace_compare_test_tiny.json.gz"
RUN = "toy"
FORMATS = ("table", "md", "json", "csv")
REPORT_HEADERS = [
    *("window", "start ms", "duration ms", "CP ms", "bound by", "share"),
    *("class", "% of CP"),
    *("name", "category", "self ms", "% of time", "count", "on CP"),
    "lane",
]
REPORT_KEYS = ["table", "window", "duration_ns", "cp_ns", "class", "name", "category", "total_ns", "lane"]


@dataclass(frozen=True)
class Case:
    """One command line, the headers its tables must show, and the csv columns it must have."""

    name: str
    args: tuple[str, ...]
    headers: tuple[str, ...]
    csv_keys: tuple[str, ...]
    json_key: str | None = None  # a key of the json object, or None for a list


CASES = [
    Case(
        "inspect",
        ("inspect", str(TRACE)),
        ("category", "events", "kind", "count", "thread", "busy ms", "top names", "kernels", "copies"),
        ("table", "category", "events", "pid", "tid", "thread", "busy_ms", "top_names", "kernels"),
    ),
    Case(
        "analyze",
        ("analyze", str(TRACE), "--top", "4"),
        (*REPORT_HEADERS, "slack ms"),
        (*REPORT_KEYS, "slack_ns"),
        "hotspots",
    ),
    Case(
        "analyze-hta",
        ("analyze", str(TRACE), "--mode", "hta", "--top", "4"),
        ("class", "ms", "name"),
        ("table", "class", "cp_ns", "name"),
        "critical_path_length_ns",
    ),
    Case(
        "runs",
        ("runs",),
        ("name", "events", "edges", "steps", "CP ms", "ingested", "file"),
        ("name", "cp_ns"),
    ),
    Case("report", ("report", RUN, "--top", "4"), tuple(REPORT_HEADERS), tuple(REPORT_KEYS), "hotspots"),
    Case(
        "query",
        ("query", "steps", "-p", f"run={RUN}"),
        ("idx", "window", "step", "start_ms", "duration_ns", "cp_ns", "bound_by", "bound_by_share"),
        ("idx", "window", "step", "start_ms", "duration_ns", "cp_ns", "bound_by", "bound_by_share"),
    ),
    Case(
        "query-list", ("query", "--list"), ("name", "parameters", "what it answers"), ("name", "parameters")
    ),
    Case(
        "whatif",
        ("whatif", str(TRACE), "--scale", "name~hipLaunch=0.5", "--top", "4"),
        ("window", "base ms", "predicted ms", "delta ms", "class", "% of CP", *REPORT_HEADERS[8:14]),
        ("table", "window", "base_ns", "predicted_ns", "class", "name", "cp_ns", "total_ns"),
        "predicted_ns",
    ),
    Case(
        "opportunities",
        ("opportunities", str(TRACE), "--top", "2"),
        ("by", "name", "events", "2x faster: ms", "2x faster: %", "removed: ms", "removed: %"),
        ("group", "name", "events", "saving_2x_ns", "saving_removed_share"),
    ),
    Case(
        "compare",
        ("compare", str(BASE), str(TEST), "--top", "3"),
        ("metric", "A", "B", "delta", "class", "A ms", "B ms", "delta ms", "name", "call path"),
        ("table", "metric", "a", "b", "class", "a_ns", "delta_ns", "name", "call_path"),
        "call_paths",
    ),
]
JOB_CASES: list[Case] = []
if CORPUS is not None:  # a real job: the shared corpus's multi-rank traces (none ship with the tests)
    JOB = CORPUS / "generated" / "multirank" / "g_ddp_ws2_sleep40_r1"
    JOB_CASES += [
        Case(
            "analyze-job",
            ("analyze", str(JOB), "--executor", "serial", "--top", "3"),
            ("step", "job step ms", "slowest", "straggler", "late ms", "path by rank"),
            ("table", "step", "job_step_ns", "straggler", "rank", "offset_ns"),
            "steps",
        ),
        Case(
            "whatif-job",
            ("whatif-job", str(JOB), "--straggler-median", "--executor", "serial"),
            ("step", "base ms", "predicted ms", "change ms", "ended by before", "ended by after"),
            ("label", "base_ns", "predicted_ns", "delta_ns"),
            "steps",
        ),
    ]
CASES.append(
    Case(
        "breakdown",
        ("breakdown", str(TRACE), "--top", "3"),
        ("window", "device", "span ms", "compute", "idle kind", "on the path ms", "class", "kernels"),
        ("table", "label", "span_ns", "compute_share", "idle", "cp_ns", "class", "total_ns", "p95_ns"),
        "temporal",
    )
)
CASES.append(
    Case(
        "validate",
        # five steps, so twenty pairs: every column of the pairs table, at half the CPU of
        # the 63k-event 2020 trace (the command runs once per format)
        ("validate", str(DATA / "hta" / "cpu_only_gloo_rank34_full.json.gz"), "--pairs"),
        ("step i", "step j", "i ms", "j ms", "predicted ms", "error", "naive", "matched"),
        ("i", "j", "base_ns", "observed_ns", "predicted_ns", "error"),
        "summary",
    )
)
INGEST = Case(
    "ingest",
    ("ingest", str(TRACE), "--top", "4"),
    (*REPORT_HEADERS, "slack ms"),
    tuple(REPORT_KEYS),
)


def ctda(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``ctda ARGS`` in a fresh process, stdout and stderr to pipes."""
    return subprocess.run(
        [sys.executable, "-m", "ctda.cli.app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def invoke(runner: CliRunner, args: tuple[str, ...]) -> str:
    """stdout of ``ctda ARGS`` run in-process; the command must succeed."""
    done = runner.invoke(app, list(args))
    assert done.exit_code == 0, f"{args}: {done.output}"
    return done.stdout


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment every case runs in: a fresh embedded store, an 80-column pipe."""
    return {"CTDA_DB": str(tmp_path_factory.mktemp("store") / "s.lbug"), "COLUMNS": "80"}


def _outputs(cases: list[Case], env: dict[str, str]) -> dict[tuple[str, str], str]:
    register()
    runner = CliRunner(env={**env, "CTDA_PROGRESS": None})
    return {(c.name, fmt): invoke(runner, (*c.args, "--format", fmt)) for c in cases for fmt in FORMATS}


@pytest.fixture(scope="module")
def outputs(env: dict[str, str]) -> dict[tuple[str, str], str]:
    """stdout of every case in every format, the store ones against a fresh embedded store."""
    register()
    runner = CliRunner(env={**env, "CTDA_PROGRESS": None})
    out: dict[tuple[str, str], str] = {}
    # the writers first: each ingest stores the trace as a run of its own
    for fmt in FORMATS:
        run = RUN if fmt == "table" else f"{RUN}-{fmt}"
        out[("ingest", fmt)] = invoke(runner, (*INGEST.args, "--run", run, "--format", fmt))
    return out | _outputs(CASES, env)


@pytest.fixture(scope="module")
def job_outputs(env: dict[str, str]) -> dict[tuple[str, str], str]:
    """stdout of the job cases (the corpus's two-rank job) in every format."""
    assert CORPUS is not None
    return _outputs(JOB_CASES, env)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_process_with_stdout_a_pipe_prints_what_the_runner_does(
    fmt: str, outputs: dict[tuple[str, str], str], env: dict[str, str]
) -> None:
    """The in-process runner stands in for a pipe: a real process prints the same bytes."""
    quiet = {k: v for k, v in os.environ.items() if k != "CTDA_PROGRESS"}
    done = ctda(("analyze", str(TRACE), "--top", "4", "--format", fmt), {**quiet, **env})
    assert done.returncode == 0, done.stderr
    assert done.stdout == outputs[("analyze", fmt)]


ALL = [INGEST, *CASES, *JOB_CASES]


@pytest.fixture
def printed(request: pytest.FixtureRequest, case: Case) -> dict[tuple[str, str], str]:
    """The outputs holding ``case``: the job cases' own (they read the corpus), else the rest."""
    name = "job_outputs" if case in JOB_CASES else "outputs"
    got: dict[tuple[str, str], str] = request.getfixturevalue(name)
    return got


RULE_CHARS = set("─━═╇┿╋┼╪+|-: ")


def header_lines(text: str) -> list[str]:
    """Lines directly above a table's rule (the box line under its headers)."""
    lines = text.splitlines()
    return [
        lines[i - 1]
        for i, line in enumerate(lines)
        if i and line.strip() and set(line.strip(" │╭╮╰╯")) <= RULE_CHARS and ("─" in line or "━" in line)
    ]


def tables(text: str) -> list[list[list[str]]]:
    """The rich tables of a text: each a list of rows of cells (header row first)."""
    out: list[list[list[str]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "╇" not in line:
            continue
        rows = [_cells(lines[i - 1], "┃")]
        for body in lines[i + 1 :]:
            if "│" not in body:
                break
            rows.append(_cells(body, "│"))
        out.append(rows)
    return out


def _cells(line: str, sep: str) -> list[str]:
    return [c.strip() for c in line.split(sep)]


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_table_output_keeps_every_header_and_column(case: Case, printed: dict[tuple[str, str], str]) -> None:
    text = printed[(case.name, "table")]
    heads = header_lines(text)
    assert heads, text
    assert not [h for h in heads if "…" in h], heads
    for header in case.headers:
        assert any(re.search(rf"(^|\s){re.escape(header)}(\s|$)", h) for h in heads), (header, heads)
    for table in tables(text):
        header, *rows = table
        if not rows:
            continue
        assert all(len(r) == len(header) for r in rows), table
        for col, title in enumerate(header):
            assert any(r[col] for r in rows), f"column {title!r} is empty in {case.name}: {table}"


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_markdown_output_has_every_header(case: Case, printed: dict[tuple[str, str], str]) -> None:
    text = printed[(case.name, "md")]
    lines = text.splitlines()
    heads = [lines[i - 1] for i, line in enumerate(lines) if i and line.startswith("|---")]
    cells = {c.strip() for line in heads for c in line.strip("|").split(" | ")}
    for header in case.headers:
        assert header in cells, (header, heads)
    assert not [h for h in heads if "…" in h], heads


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_json_output_parses(case: Case, printed: dict[tuple[str, str], str]) -> None:
    data = json.loads(printed[(case.name, "json")])
    if case.name in ("inspect", "ingest"):  # one element per trace
        assert isinstance(data, list) and len(data) == 1
        data = data[0]
    if case.json_key is None:
        assert isinstance(data, (list, dict)) and data
    else:
        assert case.json_key in data, sorted(data)


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_csv_output_starts_with_its_header_row(case: Case, printed: dict[tuple[str, str], str]) -> None:
    rows = list(csv.reader(io.StringIO(printed[(case.name, "csv")])))
    header = rows[0]
    for key in case.csv_keys:
        assert key in header, (key, header)
    assert len(rows) > 1 and all(len(r) == len(header) for r in rows)


def test_pipe_report_matches_the_trace(outputs: dict[tuple[str, str], str]) -> None:
    """The piped table carries the same numbers as the json (the demo trace: 9.337 ms)."""
    text = outputs[("analyze", "table")]
    assert "critical path 9.337 ms over 2 window(s)" in text
    hot = json.loads(outputs[("analyze", "json")])["hotspots"][0]
    assert hot["name"] == "hipLaunchKernel"
    (row,) = [r for t in tables(text) for r in t[1:] if r[0] == "hipLaunchKernel"]
    assert row[1:4] == ["cuda_runtime", f"{hot['cp_ns'] / 1e6:,.3f}", f"{hot['cp_share']:.1%}"]
    csv_rows = list(csv.DictReader(io.StringIO(outputs[("analyze", "csv")])))
    (hot_csv,) = [r for r in csv_rows if r["table"] == "hotspots" and r["name"] == "hipLaunchKernel"]
    assert int(hot_csv["cp_ns"]) == hot["cp_ns"]
