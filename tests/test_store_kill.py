"""kill -9 of a real ``ctda ingest`` at many points never leaves a store the next command
cannot open: ``runs``, ``report`` and ``ingest`` work afterwards with no manual repair.

The killer watches the store's files (the database, its WAL, the checkpoint's shadow file
and lock files) and sends SIGKILL at the N-th change it sees, for N spread over the whole
write (one ingest left to finish first counts the changes a write makes: the engine decides
how often it touches its files, so the test measures rather than assumes); a few kills land
before the store is touched at all. Kills that hit a checkpoint
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
#: kills at store-file changes, spread evenly from the third change to SPREAD of the changes
#: a whole write makes (a small trace's write in one transaction makes 40-50: opening and
#: checkpointing what the last writer left, the transaction's WAL, the commit's checkpoint;
#: a write may make a few fewer than the one measured, hence not to the very end). Ten,
#: since neighbouring changes mostly land in the same stage and each kill costs a process
#: start; most fall during a checkpoint
CHANGE_KILLS = 10
SPREAD = 0.85
#: seconds after the start, before the store is opened for writing
EARLY_POINTS = [0.3, 1.5]
CTDA = [sys.executable, "-c", "from ctda.cli.app import main; main()"]
#: tries per kill point: one that finished before its kill is tried again a little earlier
RETRIES = 3


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


def _change_points(changes: int) -> list[int]:
    """The store-file changes to kill at, for a write that makes ``changes`` of them."""
    last = max(int(changes * SPREAD), 3 + CHANGE_KILLS)
    return sorted({3 + round(i * (last - 3) / (CHANGE_KILLS - 1)) for i in range(CHANGE_KILLS)})


def _kill_ingest(db: Path, change: int | None, seconds: float | None) -> tuple[bool, bool, int]:
    """Start an ingest and SIGKILL it (neither ``change`` nor ``seconds``: let it finish);
    returns (killed before it ended, during a checkpoint, store-file changes seen)."""
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
    return killed, killed and hit_checkpoint, changes


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, f"ctda {' '.join(args)}: {res.output}"
    return res.output


def test_kill_ingest_anywhere_leaves_an_openable_store(tmp_path: Path) -> None:
    db = tmp_path / "store.lbug"
    _cli("ingest", str(TRACE), "--db", str(db), "--run", RUN)
    # a replacing write grows the file while the old run's pages are still held; once they
    # are free the next writes reuse them: count the changes of such a steady write
    _cli("ingest", str(TRACE), "--db", str(db), "--run", RUN, "--force")
    finished, _, changes = _kill_ingest(db, None, None)
    assert not finished and changes >= 20, f"an ingest made only {changes} store-file changes"
    killed = in_checkpoint = 0
    points = [(None, s) for s in EARLY_POINTS] + [(c, None) for c in _change_points(changes)]
    assert len(points) == len(EARLY_POINTS) + CHANGE_KILLS
    for i, (change, seconds) in enumerate(points):
        for _ in range(RETRIES):
            k, c, _ = _kill_ingest(db, change, seconds)
            if k:
                break
            # it finished first: a write may make a few fewer changes than the one measured,
            # and a poll can miss one; the same stage, a little earlier
            change = None if change is None else max(3, int(change * 0.8))
            seconds = None if seconds is None else seconds / 2
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
    assert killed >= len(points) - 1, f"only {killed} ingests were killed before they finished ({points})"
    assert in_checkpoint >= 3, f"only {in_checkpoint} kills landed during a checkpoint"
