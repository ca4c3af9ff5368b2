"""A writer killed while its commit was being appended to the WAL leaves a torn last record;
the next command opens the store anyway, with every earlier commit intact.

The engine refuses such a file by default ("Checksum verification failed, the WAL file is
corrupted"), which a kill -9 at the wrong moment produced on CI. The test makes the state
on purpose: a real ``ctda ingest`` runs with automatic checkpoints off and exits without
closing the store, so its whole committed run stays in the WAL; the WAL is then cut at
several points, as a kill during that append would leave it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ctda.cli.store_cmds  # noqa: F401  (registers the commands on the app)
from ctda.cli.common import app

pytest.importorskip("ladybug")

TRACE = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"
#: the writer's close is replaced by a plain process exit, so the written store is never
#: closed (closing would checkpoint the WAL into the file)
UNCLOSED = """
import os, sys
from ctda.store import ladybug_store as lb
lb.DB_OPTIONS["auto_checkpoint"] = False
shut = lb.LadybugStore.close
lb.LadybugStore.close = lambda self: shut(self) if self.read_only else os._exit(0)
from ctda.cli.app import main
sys.argv = ["ctda", "ingest", sys.argv[1], "--db", sys.argv[2], "--run", "second", "--force"]
main()
"""


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, f"ctda {' '.join(args)}: {res.output}"
    return res.output


def test_a_torn_wal_tail_keeps_what_committed(tmp_path: Path) -> None:
    base = tmp_path / "base" / "store.lbug"
    _cli("ingest", str(TRACE), "--db", str(base), "--run", "first")
    out = subprocess.run(
        [sys.executable, "-c", UNCLOSED, str(TRACE), str(base)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    wal = base.with_name(base.name + ".wal")
    size = wal.stat().st_size
    assert size > 10_000, f"the second run's commit left only {size} B of WAL"
    # untouched, the WAL replays: both runs are there
    whole = tmp_path / "whole"
    shutil.copytree(base.parent, whole)
    assert '"second"' in _cli("runs", "--db", str(whole / "store.lbug"), "--format", "json")
    for cut in (20, size // 2, size - 7):
        folder = tmp_path / f"cut{cut}"
        shutil.copytree(base.parent, folder)
        db = folder / "store.lbug"
        with open(db.with_name(db.name + ".wal"), "r+b") as fh:
            fh.truncate(cut)
        # a reader opens the store, with the first run whole and the torn second one gone
        runs = _cli("runs", "--db", str(db), "--format", "json")
        assert '"first"' in runs and '"second"' not in runs, f"cut at {cut} of {size} B: {runs}"
    # and the store is a working one: read and written again by the real commands
    assert "ProfilerStep" in _cli("report", "first", "--db", str(db))
    _cli("ingest", str(TRACE), "--db", str(db), "--run", "second", "--force")
    assert '"second"' in _cli("runs", "--db", str(db), "--format", "json")
