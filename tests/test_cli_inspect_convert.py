"""``ctda inspect`` and ``ctda convert``: output, formats, and one-line errors with exit code 2."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctda.cli.convert_cmd
import ctda.cli.inspect_cmd  # noqa: F401  (registers the commands on the app)
from ctda.cli.common import app
from ctda.ingest.reader import read_trace

DATA = Path(__file__).parent / "data"
SMALL = DATA / "hta/cuda_event_sync_tiny.json.gz"
STEPS = DATA / "kineto/tb_plugin_gpu_metrics_input_small.json.gz"
DISTRIBUTED = DATA / "hta/cpu_only_gloo_rank34_full.json.gz"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1"})


def test_inspect_table_shows_every_section(runner: CliRunner) -> None:
    result = runner.invoke(app, ["inspect", str(SMALL)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for section in ("Events by category", "Synchronization", "CPU threads", "GPU streams", "ProfilerSteps"):
        assert section in out
    assert "cuda_sync: Context Sync" in out and "cudaDeviceSynchronize" in out
    assert "ac2g [f]" in out  # flow phases shown, not eaten as markup
    assert "#100" in out  # ProfilerStep#100
    assert "No NCCL kernels or ops, no collectives." in out
    assert "rank 0" in out


def test_inspect_json_lists_one_summary_per_trace(runner: CliRunner) -> None:
    result = runner.invoke(app, ["inspect", "--format", "json", str(SMALL), str(DISTRIBUTED)])
    assert result.exit_code == 0, result.output
    small, dist = json.loads(result.stdout)
    assert small["n_events"] == 92 and small["n_complete"] == 33 and small["n_flows"] == 21
    assert small["sync"]["cuda_sync: Context Sync"] == 1
    assert [s["step"] for s in small["steps"]] == [100]
    assert small["gpu_streams"] and small["cpu_threads"][0]["name"].startswith("thread ")
    assert dist["rank"] == 34 and dist["world_size"] == 300 and dist["backend"] == "gloo"
    assert dist["nccl_kernels"] == {} and dist["gpu_streams"] == []
    assert dist["collective_ops"] == {"gloo:all_reduce": 10, "c10d::allreduce_": 10}
    assert len(dist["steps"]) == 5
    assert dist["span_ms"] == pytest.approx(1285.174, abs=1e-3)


def test_convert_then_read_back(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "steps.parquet"
    result = runner.invoke(app, ["convert", str(STEPS), str(target)])
    assert result.exit_code == 0, result.output
    assert "340 events" in result.stdout
    original, back = read_trace(STEPS), read_trace(target)
    assert back.events.equals(original.events)
    assert back.lanes.equals(original.lanes)
    assert back.flows.equals(original.flows)
    assert back.meta == original.meta
    # and the Parquet table is a valid input to inspect
    shown = runner.invoke(app, ["inspect", "--format", "json", str(target)])
    assert shown.exit_code == 0 and json.loads(shown.stdout)[0]["n_events"] == 340


def test_convert_refuses_other_suffixes_and_unwritable_targets(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["convert", str(STEPS), str(tmp_path / "out.csv")])
    assert result.exit_code == 2 and "must end in .parquet" in result.stderr
    result = runner.invoke(app, ["convert", str(STEPS), str(tmp_path / "no" / "dir" / "out.parquet")])
    assert result.exit_code == 2 and "cannot write" in result.stderr
    assert "Traceback" not in result.output


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    def put(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path

    full = gzip.compress(
        json.dumps({"traceEvents": [{"ph": "X", "ts": i, "dur": 1} for i in range(3000)]}).encode()
    )
    adir = tmp_path / "adir"
    adir.mkdir()
    return {
        "not JSON": (put("a.json", b"<html>not a trace</html>"), "not JSON"),
        "truncated gzip": (put("b.json.gz", full[: len(full) // 2]), "truncated gzip"),
        "0-byte file": (put("c.json", b""), "empty file"),
        "empty traceEvents": (put("d.json", b'{"traceEvents": []}'), "no events"),
        "wrong field type": (
            put("e.json", b'{"traceEvents": [{"ph": "X", "ts": [1], "dur": 1}]}'),
            "field ts",
        ),
        "X without ts": (put("f.json", b'{"traceEvents": [{"ph": "X", "dur": 1}]}'), "has no ts"),
        "X without dur": (put("g.json", b'{"traceEvents": [{"ph": "X", "ts": 1}]}'), "has no dur"),
        "a directory": (adir, "is a directory"),
        "a missing path": (tmp_path / "missing.json.gz", "no such file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not JSON",
        "truncated gzip",
        "0-byte file",
        "empty traceEvents",
        "wrong field type",
        "X without ts",
        "X without dur",
        "a directory",
        "a missing path",
    ],
)
@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_bad_input_exits_2_with_one_line(runner: CliRunner, tmp_path: Path, case: str, command: str) -> None:
    path, problem = _bad_inputs(tmp_path)[case]
    args = [command, str(path)] + ([str(tmp_path / "out.parquet")] if command == "convert" else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and problem in lines[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_bad_input_through_the_real_entry_point(tmp_path: Path) -> None:
    """The installed entry point, in a subprocess: stderr has one line and no traceback."""
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X"')[:-4])
    proc = subprocess.run(
        [sys.executable, "-m", "ctda.cli.app", "inspect", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and str(bad) in proc.stderr
