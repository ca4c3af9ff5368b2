"""kill -9 of a real ``ctda ingest`` at many points never leaves a store the next command
cannot open: ``runs``, ``report`` and ``ingest`` work afterwards with no manual repair.

The killer watches the store's files (the database, its WAL, the checkpoint's shadow file
and lock files) and sends SIGKILL at the N-th change it sees, for N spread over the whole
write; a few kills land before the store is touched at all. Kills that hit a checkpoint
(a shadow file, a WAL being checkpointed, or a checkpoint lock present) are counted: at
least some must, since those are the ones that used to leave "recovery pending".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctda.cli.store_cmds  # noqa: F401  (registers the commands on the app)
from ctda.cli.common import app

pytest.importorskip("ladybug")

TRACE = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
RUN = "victim"
#: store-file changes to kill at (a small trace's write makes about 60 of them): every sixth,
#: since neighbouring changes mostly land in the same stage of the write and each kill costs
#: a process start; most fall during a checkpoint
CHANGE_POINTS = list(range(3, 60, 6))
#: seconds after the start, before the store is opened for writing
EARLY_POINTS = [0.3, 1.5]
CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]


def _state(folder: Path, stem: str) -> tuple[tuple[str, int], ...]:
    out = []
    for name in sorted(os.listdir(folder)):
        if name.startswith(stem):
            try:
                out.append((name, os.stat(folder / name).st_size))
            except FileNotFoundError:
                continue
    return tuple(out)


def _in_checkpoint(state: tuple[tuple[str, int], ...]) -> bool:
    return any(n.endswith((".shadow", ".wal.checkpoint", ".checkpoint.intent.lock")) for n, _ in state)


def _kill_ingest(db: Path, change: int | None, seconds: float | None) -> tuple[bool, bool]:
    """Start an ingest and SIGKILL it; returns (killed before it ended, during a checkpoint)."""
    cmd = [*CTDA, "ingest", str(TRACE), "--db", str(db), "--run", RUN, "--force"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    last = _state(db.parent, db.name)
    changes = 0
    hit_checkpoint = False
    try:
        while proc.poll() is None:
            now = _state(db.parent, db.name)
            if now != last:
                changes += 1
                last = now
            due = (seconds is not None and time.monotonic() - t0 >= seconds) or (
                change is not None and changes >= change
            )
            if due:
                hit_checkpoint = _in_checkpoint(now)
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.0002)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = proc.returncode == -signal.SIGKILL
    assert killed or proc.returncode == 0, err.decode(errors="replace")
    return killed, killed and hit_checkpoint


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, f"ctda {' '.join(args)}: {res.output}"
    return res.output


def test_kill_ingest_anywhere_leaves_an_openable_store(tmp_path: Path) -> None:
    db = tmp_path / "store.lbug"
    _cli("ingest", str(TRACE), "--db", str(db), "--run", RUN)
    killed = in_checkpoint = 0
    points = [(None, s) for s in EARLY_POINTS] + [(c, None) for c in CHANGE_POINTS]
    for i, (change, seconds) in enumerate(points):
        k, c = _kill_ingest(db, change, seconds)
        killed += k
        in_checkpoint += c
        # every command works afterwards, with nothing repaired by hand
        if i % 4 == 0:  # the real commands, as separate processes, now and then
            for args in (["runs"], ["report", RUN]):
                out = subprocess.run([*CTDA, *args, "--db", str(db)], capture_output=True, text=True)
                assert out.returncode == 0, out.stderr
        runs = _cli("runs", "--db", str(db), "--format", "json")
        if RUN in runs:  # killed after the flip: the new run is complete
            _cli("report", RUN, "--db", str(db))
        _cli("ingest", str(TRACE), "--db", str(db), "--run", RUN, "--force")
        assert RUN in _cli("runs", "--db", str(db), "--format", "json")
    assert killed >= len(points) - 1, f"only {killed} ingests were killed before they finished"
    assert in_checkpoint >= 3, f"only {in_checkpoint} kills landed during a checkpoint"
