"""Every bad option gets the library's one-line message from the CLI, with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ctda.cli.app import _register
from ctda.cli.common import app
from tests.test_api import MINITOY, SMALL

_register()

OPTION_CASES = [
    (["--cross-thread", "telepathy"], "unknown cross-thread rule(s) telepathy"),
    (["--cross-thread", "gil,nope"], "unknown cross-thread rule(s) nope"),
    (["--mode", "fast"], "unknown mode 'fast'; choose from ctda, hta"),
    (["--windows", "step"], "did you mean 'steps'?"),
    (["--windows", "(["], "windows '([' is not a valid regular expression"),
]


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("CTDA_DB", raising=False)
    return CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    return lines[0]


@pytest.mark.parametrize(("args", "message"), OPTION_CASES, ids=[" ".join(a) for a, _ in OPTION_CASES])
@pytest.mark.parametrize("command", ["analyze", "ingest"])
def test_bad_analysis_option(
    runner: CliRunner, tmp_path: Path, command: str, args: list[str], message: str
) -> None:
    db = tmp_path / "store.lbug"
    extra = ["--db", str(db)] if command == "ingest" else []
    # the trace does not exist: the options are checked before anything is read
    line = one_line_error(runner.invoke(app, [command, str(tmp_path / "missing.json"), *args, *extra]))
    assert message in line
    assert not db.exists()


def test_bad_step_and_params(runner: CliRunner, tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "store.lbug")]
    step = "step must be a ProfilerStep number or 'all', not 'two'"
    assert step in one_line_error(runner.invoke(app, ["analyze", str(tmp_path / "x.json"), "--step", "two"]))
    assert step in one_line_error(runner.invoke(app, ["report", "r", "--step", "two", *db]))
    assert "no ProfilerStep#9 in this trace" in one_line_error(
        runner.invoke(app, ["analyze", str(SMALL), "--step", "9"])
    )
    assert "--param takes key=value, not 'run'" in one_line_error(
        runner.invoke(app, ["query", "steps", "--param", "run", *db])
    )
    assert "--param takes key=value, not 'x'" in one_line_error(
        runner.invoke(app, ["whatif", str(SMALL), "--cypher", "whatif_copy_3x", "-p", "x", *db])
    )
    assert "needs a stored run" in one_line_error(
        runner.invoke(app, ["whatif", str(SMALL), "--cypher", "whatif_copy_3x", *db])
    )
    assert not (tmp_path / "store.lbug").exists()


def test_mode_names_are_case_insensitive(runner: CliRunner) -> None:
    upper = runner.invoke(app, ["analyze", str(MINITOY), "--mode", "HTA", "--format", "json"])
    lower = runner.invoke(app, ["analyze", str(MINITOY), "--mode", "hta", "--format", "json"])
    ours = runner.invoke(app, ["analyze", str(MINITOY), "--format", "json"])
    assert upper.exit_code == 0, upper.output
    assert upper.stdout == lower.stdout != ours.stdout
