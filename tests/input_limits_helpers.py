"""What ``test_input_limits.py``, ``test_whatif_limits.py`` and other modules checking
hostile input share: the command line in-process (its commands registered), the one-line
error check, the shipped inputs, and a trace event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import Result
from typer.testing import CliRunner

from ctda.cli.app import _register
from ctda.cli.common import app

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "data" / "hta" / "cuda_event_sync_tiny.json.gz"
DEMO = ROOT / "tests" / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
JOB = ROOT / "tests" / "data" / "multirank" / "g_ddp_ws2_compute30_r1"

_register()


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})
    return runner.invoke(app, list(args))


def one_line(res: Result) -> str:
    """Exit 2 with exactly one line on stderr, no traceback, no stray exception."""
    assert res.exit_code == 2, (res.exit_code, res.output[-2000:], res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    return lines[0]


def event(name: str = "aten::add", ts: float = 1, dur: float = 2, **extra: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, **extra}
