"""What a user reads off the CLI: help on every option, no type labels on flags, a table with
no rows saying "none", a scenario against its own run read as a predicted change, and the
job summary in plain values."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

import ctda
from ctda.cli.app import app, register
from ctda.render.output import EMPTY, Col, Document, Format, Section, emit
from ctda.render.whatif import comparison_doc
from tests.conftest import DATA

SMALL = DATA / "hta" / "simple_add_param_benchmark.json.gz"
OTHER = DATA / "hta" / "trace_compare_test_tiny.json.gz"
JOB = DATA / "multirank" / "g_ddp_ws2_compute30_r1"


def commands() -> list[tuple[str, Any]]:
    """Every command of the app, the root included, by its full name (typer may build them
    on its own copy of click, so the walk goes by the group interface, not click's classes)."""
    register()
    out: list[tuple[str, Any]] = []

    def walk(cmd: Any, name: str, ctx: Any) -> None:
        out.append((name, cmd))
        if hasattr(cmd, "list_commands"):
            for sub_name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, sub_name)
                assert sub is not None, sub_name
                walk(sub, f"{name} {sub_name}", sub.context_class(sub, parent=ctx, info_name=sub_name))

    root = typer.main.get_command(app)
    walk(root, "ctda", root.context_class(root, info_name="ctda"))
    return out


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{name} {p.name}"
        for name, cmd in commands()
        for p in cmd.params
        if not (getattr(p, "help", None) or "").strip()
    ]
    assert len(commands()) > 15
    assert missing == []


@pytest.mark.parametrize("name", [n for n, _ in commands()])
def test_help_shows_no_type_on_a_flag(name: str) -> None:
    """``--force`` and ``--help`` take no value: their help line names no type."""
    args = name.split()[1:]
    done = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "<bool>" not in done.output
    help_line = [line for line in done.output.splitlines() if "--help" in line]
    assert help_line and "Show this message and exit." in help_line[0]


def _printed(section: Section, fmt: Format) -> str:
    out = io.StringIO()
    emit(Document("t", [section]), fmt, out=out)
    return out.getvalue()


def test_a_table_with_no_rows_says_none() -> None:
    cols = [Col("name", "name"), Col("cp_ns", "CP ms", "ms")]
    empty = Section("hot", "Hotspots", cols, [])
    table = _printed(empty, Format.table)
    assert "CP ms" in table and table.rstrip().splitlines()[-1].strip() == EMPTY
    assert _printed(empty, Format.md).rstrip().splitlines()[-1] == EMPTY
    full = Section("hot", "Hotspots", cols, [["aten::mm", 2_000_000]])
    assert EMPTY not in _printed(full, Format.table) and EMPTY not in _printed(full, Format.md)


def _text(doc: Document) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(*(b for b in doc.blocks if not isinstance(b, Section)))
    return out.getvalue()


def test_a_scenario_against_its_own_run_is_a_predicted_change() -> None:
    a = ctda.analyze(SMALL)
    sc = ctda.api.whatif(a, scale="name~cudaFree=0")
    own = ctda.compare(a, sc)
    assert own.prediction_error["versus"] == "base" and own.prediction_error["error_ns"] < 0
    text = _text(comparison_doc(own, 3))
    assert "predicted change" in text and "error" not in text
    # against another measurement the same numbers are the prediction's error
    other = ctda.compare(ctda.analyze(OTHER), sc)
    assert other.prediction_error["versus"] == "measurement"
    assert "(error " in _text(comparison_doc(other, 3))


def test_store_compare_of_a_run_and_its_scenario_is_a_predicted_change(tmp_path: Path) -> None:
    register()
    env = {"CTDA_DB": str(tmp_path / "s.lbug"), "COLUMNS": "200"}
    runner = CliRunner(env=env)
    assert runner.invoke(app, ["ingest", str(SMALL), "--run", "before"]).exit_code == 0
    done = runner.invoke(app, ["whatif", "before", "--scale", "name~cudaFree=0", "--name", "nofree"])
    assert done.exit_code == 0, done.output
    done = runner.invoke(app, ["compare", "before", "before@nofree"])
    assert done.exit_code == 0, done.output
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("prediction:")]
    assert "predicted change -" in line and "error" not in line


def test_job_summary_prints_plain_values() -> None:
    register()
    done = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["analyze", str(JOB), "--executor", "serial"])
    assert done.exit_code == 0, done.output
    (matched,) = [x for x in done.stdout.splitlines() if x.startswith("collectives:")]
    assert "{" not in matched and "unmatched 0; inconsistent 0;" in matched
    (checks,) = [x for x in done.stdout.splitlines() if x.startswith("checks:")]
    assert "every rank replays exactly: yes;" in checks
