"""``ctda analyze`` ends its process without the interpreter's teardown (ctda/cli/ending.py):
all its output out, its exit status kept; other commands, errors and in-process callers
end the usual way; output that cannot be written is one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctda.cli import ending
from ctda.cli.app import app, register
from tests.conftest import DATA

TRACE = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"
#: the entry point in a process that says when the interpreter's teardown runs
PROBE = """
import atexit, sys
atexit.register(lambda: print("teardown", file=sys.stderr))
sys.argv = ["ctda", *sys.argv[1:]]
from ctda.cli.app import main
main()
"""


def _ctda(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_analyze_ends_without_teardown_and_with_all_its_output() -> None:
    done = _ctda("analyze", str(TRACE), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "teardown" not in done.stderr
    report = json.loads(done.stdout)  # every byte flushed before the end
    assert report["critical_path_ns"] > 0
    hta = _ctda("analyze", str(TRACE), "--mode", "hta", "--format", "json")
    assert hta.returncode == 0 and "teardown" not in hta.stderr and json.loads(hta.stdout)


def test_errors_and_other_commands_end_the_usual_way() -> None:
    missing = _ctda("analyze", "/no/such/trace.json")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == ["error: /no/such/trace.json: no such file", "teardown"]
    inspect = _ctda("inspect", str(TRACE), "--format", "json")
    assert inspect.returncode == 0 and inspect.stderr.strip() == "teardown"


def test_in_process_callers_never_end_early() -> None:
    register()
    done = CliRunner().invoke(app, ["analyze", str(TRACE), "--format", "json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["critical_path_ns"] > 0
    assert ending._requested  # asked for, and only the entry point acts on it
    ending.clear()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_output_that_cannot_be_written_is_one_line_and_exit_2(fmt: str) -> None:
    for command in ("analyze", "inspect"):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-c", PROBE, command, str(TRACE), "--format", fmt],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=300,
                check=False,
            )
        assert done.returncode == 2, done.stderr
        # one line, then the usual teardown (nothing left for stdout to fail on again)
        full_disk = "error: cannot write to stdout (No space left on device)"
        assert done.stderr.splitlines() == [full_disk, "teardown"]
