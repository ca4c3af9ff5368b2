"""``ctda merge`` with hostile inputs and outputs (issue 29, item 4).

Every helper is read under the reader's limits (file type, decompressed size, expansion,
nesting, its own size cap); the metadata is read wherever it sits in the file (Kineto writes
it after the event array); ``-o`` is a regular file or a new path, never a device, a FIFO,
a symlink or an input, written atomically. Each refusal is one line and exit 2 with nothing
written.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctda.cli.convert_cmd  # noqa: F401  (registers the command on the app)
from ctda.ingest.errors import TraceError
from ctda.ingest.limits import Limits
from ctda.ingest.merge import merge_processes
from tests.input_limits_helpers import cli, one_line
from tests.test_input_limits import measured

BASE = 1_790_000_000_000_000_000


def _x(name: str, pid: int, ts: float, dur: float, cat: str = "cpu_op") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": pid, "ts": ts, "dur": dur}


def _write(path: Path, events: list[dict[str, Any]], **meta: Any) -> Path:
    """A trace with its metadata AFTER the event array, as Kineto writes it."""
    doc = {
        "schemaVersion": 1,
        "traceEvents": events,
        **{"host_name": "h1", "baseTimeNanoseconds": BASE, **meta},
    }
    text = json.dumps(doc, indent=1).encode()
    assert text.index(b'"traceEvents"') < text.index(b'"host_name"')
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def _main(tmp: Path) -> Path:
    events = [
        _x("ProfilerStep#1", 100, 1000.0, 500.0, "user_annotation"),
        _x("aten::conv", 100, 1010.0, 400.0),
        _x("aten::add", 100, 1450.0, 10.0),  # the overlap check reads the main's start times
    ]
    return _write(tmp / "main.json", events)


def _worker(tmp: Path, pid: int = 201, ts: float = 1100.0, **meta: Any) -> Path:
    return _write(
        tmp / f"w{pid}.json.gz", [_x("record.py(38): mix", pid, ts, 200.0, "python_function")], **meta
    )


def _events(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    return list(json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"])


def _nothing_written(folder: Path, *names: str) -> None:
    for name in names:
        assert not (folder / name).exists()
    assert not list(folder.glob(".*.tmp"))


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A read or write that blocks on a FIFO fails the test instead of hanging it."""
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on a FIFO"))
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# --- metadata wherever it sits ---------------------------------------------------------------


def test_a_helper_from_another_host_is_refused_though_its_metadata_comes_last(tmp_path: Path) -> None:
    """Before: host_name was looked for only before traceEvents, so this merged, exit 0."""
    line = one_line(
        cli(
            "merge",
            str(_main(tmp_path)),
            str(_worker(tmp_path, host_name="h2")),
            "-o",
            str(tmp_path / "o.json"),
        )
    )
    assert "w201.json.gz" in line and "recorded on host 'h2', the main trace on 'h1'" in line
    _nothing_written(tmp_path, "o.json")


def test_the_time_base_shift_applies_though_the_metadata_comes_last(tmp_path: Path) -> None:
    """Before: the shift was silently skipped (the helper's event stayed at 1100 µs)."""
    out = tmp_path / "o.json"
    merge_processes(_main(tmp_path), [_worker(tmp_path, baseTimeNanoseconds=BASE + 50_000)], out)
    (mix,) = [e for e in _events(out) if e["name"].endswith("mix")]
    assert mix["ts"] == pytest.approx(1150.0)
    # one side without a time base: the clocks cannot be related
    lone = _worker(tmp_path, 202, baseTimeNanoseconds=None)
    with pytest.raises(TraceError, match="the main trace records baseTimeNanoseconds and it does not"):
        merge_processes(_main(tmp_path), [lone], tmp_path / "p.json")
    _nothing_written(tmp_path, "p.json")


# --- helpers under the reader's limits -------------------------------------------------------


def _bomb(path: Path, mib: int = 1024) -> Path:
    """A helper that starts as a trace and goes on with ``mib`` MiB of blanks (~1 MB on disk)."""
    unit = gzip.compress(b" " * (64 << 20), compresslevel=9)
    path.write_bytes(gzip.compress(b'{"traceEvents":[') + unit * (mib // 64))
    return path


def _deep(path: Path, depth: int = 5000) -> Path:
    ev = (
        '{"ph":"X","name":"n","pid":201,"tid":201,"ts":1100,"dur":2,"args":'
        + '{"a":' * depth
        + "1"
        + "}" * depth
    )
    path.write_text('{"traceEvents":[' + ev + "}]}")
    return path


def test_special_files_bombs_and_deep_helpers_are_one_line(tmp_path: Path, no_hang: None) -> None:
    main = _main(tmp_path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = [
        (Path("/dev/zero"), "is a character device"),  # before: read 7 GB
        (fifo, "is a FIFO"),  # before: hung
        (tmp_path, "is a directory"),
        (_bomb(tmp_path / "bomb.json.gz"), "expands more than 200x"),  # before: read whole
        (_deep(tmp_path / "deep.json"), "nested too deeply"),  # before: a traceback
    ]
    for helper, problem in cases:
        line = one_line(cli("merge", str(main), str(helper), "-o", str(tmp_path / "o.json")))
        assert str(helper) in line and problem in line, line
    # the main trace too
    line = one_line(cli("merge", "/dev/zero", str(_worker(tmp_path)), "-o", str(tmp_path / "o.json")))
    assert "/dev/zero" in line and "character device" in line
    # a helper over its own cap (held whole as Python objects)
    big = _write(
        tmp_path / "big.json", [_x(f"f{i}", 201, 1100.0 + i, 1.0, "python_function") for i in range(2000)]
    )
    line = one_line(
        cli(
            "merge", str(main), str(big), "-o", str(tmp_path / "o.json"), env={"CTDA_MAX_HELPER_BYTES": "64K"}
        )
    )
    assert "big.json" in line and "over 0 MiB" not in line and "CTDA_MAX_HELPER_BYTES" in line
    _nothing_written(tmp_path, "o.json")


@pytest.mark.slow  # starts processes through an imported helper, which the tiering does not see
def test_a_bomb_helper_is_refused_at_bounded_memory(tmp_path: Path) -> None:
    """In a real process: one line on stderr, and peak memory within 200 MiB of the same
    command refusing a missing helper (the bomb expands to 1 GiB; it was read whole)."""
    main, bomb = _main(tmp_path), _bomb(tmp_path / "bomb.json.gz")
    _, _, base = measured(
        ["merge", str(main), str(tmp_path / "missing.json"), "-o", str(tmp_path / "o.json")]
    )
    code, err, rss = measured(["merge", str(main), str(bomb), "-o", str(tmp_path / "o.json")])
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "bomb.json.gz" in lines[0] and "expands more than 200x" in lines[0]
    assert rss - base < 200, f"peak RSS {rss} MiB, {base} MiB without the bomb"
    print(f"merge with a 1 GiB bomb helper: refused, peak RSS {rss} MiB ({base} MiB without it)")
    _nothing_written(tmp_path, "o.json")


def test_helpers_use_the_limits_given(tmp_path: Path) -> None:
    main = _main(tmp_path)
    events = [_x(f"f{i}", 201, 1100.0 + i, 1.0, "python_function") for i in range(50)]
    helper = _write(tmp_path / "w.json.gz", events)
    cap = main.stat().st_size + 1  # the main trace fits, the helper's text does not
    assert len(gzip.decompress(helper.read_bytes())) > cap
    with pytest.raises(TraceError, match=f"{helper.name}: more than {cap:,} bytes of JSON"):
        merge_processes(main, [helper], tmp_path / "o.json", Limits(max_bytes=cap))
    _nothing_written(tmp_path, "o.json")


# --- the output ------------------------------------------------------------------------------


def test_the_output_is_never_a_device_fifo_symlink_or_input(tmp_path: Path, no_hang: None) -> None:
    main, helper = _main(tmp_path), _worker(tmp_path)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "target.json")
    kept = tmp_path / "kept.json"
    kept.write_text("keep me")
    to_file = tmp_path / "to_file.json"
    to_file.symlink_to(kept)
    hard = tmp_path / "hard.json"
    os.link(main, hard)
    for out, problem in (
        (Path("/dev/null"), "is not a regular file"),
        (fifo, "is not a regular file"),
        (dangling, "is a symbolic link"),
        (to_file, "is a symbolic link"),
        (tmp_path, "is a directory"),
        (hard, "is one of the inputs"),
        (helper, "is one of the inputs"),
    ):
        line = one_line(cli("merge", str(main), str(helper), "-o", str(out)))
        assert str(out) in line and problem in line, line
    assert fifo.is_fifo() and dangling.is_symlink() and not (tmp_path / "target.json").exists()
    assert to_file.is_symlink() and kept.read_text() == "keep me"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    _nothing_written(tmp_path, "o.json")


def test_an_existing_output_is_replaced_whole_keeping_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "merged.json.gz"
    out.write_bytes(b"old")
    out.chmod(0o640)
    merge_processes(_main(tmp_path), [_worker(tmp_path)], out)
    assert len(_events(out)) == 4 and stat.S_IMODE(out.stat().st_mode) == 0o640
    # a failed merge leaves the previous output as it was
    with pytest.raises(TraceError, match="the same process given twice"):
        merge_processes(_main(tmp_path), [_worker(tmp_path, 100)], out)
    assert len(_events(out)) == 4
    _nothing_written(tmp_path)
