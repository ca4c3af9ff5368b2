"""The complete runs of an embedded store kept between processes (``ctda.store.listing``):
a second listing of an unchanged store opens nothing; any write shows at once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ctda.api import open_store
from ctda.store import listing
from ctda.store.config import Target
from tests.test_store_suite import SMALL, STEPS


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "ctda" / "runs"


def settle(db: Path) -> None:
    """Date the store's files back past the settling time (as if written a while ago)."""
    old = time.time_ns() - 2 * listing.SETTLE_NS
    for p in (db, db.with_name(db.name + ".wal")):
        if p.exists():
            os.utime(p, ns=(old, old))


def test_unchanged_store_is_listed_without_opening_it(tmp_path: Path, cache: Path) -> None:
    db = tmp_path / "s.lbug"
    t = Target("ladybug", str(db))
    with open_store(db) as s:
        s.ingest(SMALL, "small")
        reads: list[int] = []

        def read() -> list:  # type: ignore[type-arg]
            reads.append(1)
            return s._read_runs()

        # just written: within the mtime's tick a later write could go unseen, so not kept
        assert [r.name for r in listing.complete_runs(t, read)] == ["small"] and not cache.exists()
        settle(db)
        first = listing.complete_runs(t, read)
        assert len(reads) == 2 and len(list(cache.iterdir())) == 1
        again = listing.complete_runs(t, read)
        assert len(reads) == 2 and again == first  # the same RunInfo values, read from the cache
        assert again[0].events == 796 and again[0].steps == 1 and again[0].options == first[0].options

        s.ingest(STEPS, "steps")  # a write moves the signature: read again
        assert [r.name for r in s.runs()] == ["small", "steps"]
        settle(db)
        assert [r.name for r in s.runs()] == ["small", "steps"]
        s.rm("small")
        assert [r.name for r in s.runs()] == ["steps"]


def test_a_foreign_or_torn_cache_file_is_a_miss(tmp_path: Path, cache: Path) -> None:
    db = tmp_path / "s.lbug"
    with open_store(db) as s:
        s.ingest(SMALL, "small")
        settle(db)
        assert [r.name for r in s.runs()] == ["small"]
        (kept,) = cache.iterdir()
        kept.write_text(kept.read_text()[:40])  # torn
        assert [r.name for r in s.runs()] == ["small"]
        kept.write_text('{"key": {}, "runs": []}')  # another store's, or another version's
        assert [r.name for r in s.runs()] == ["small"]


def test_cli_lists_from_the_cache_and_sees_a_delete(tmp_path: Path, cache: Path) -> None:
    from typer.testing import CliRunner

    import ctda.cli.store_cmds  # noqa: F401  (registers the commands)
    from ctda.cli.common import app

    db = tmp_path / "s.lbug"
    runner = CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})
    assert runner.invoke(app, ["ingest", str(SMALL), "--run", "a", "--db", str(db)]).exit_code == 0
    assert runner.invoke(app, ["ingest", str(SMALL), "--run", "b", "--db", str(db), "--force"]).exit_code == 0
    settle(db)
    for _ in range(2):
        out = runner.invoke(app, ["runs", "--db", str(db), "--format", "json"])
        assert out.exit_code == 0 and '"a"' in out.stdout and '"b"' in out.stdout
    assert len(list(cache.iterdir())) == 1
    assert runner.invoke(app, ["rm", "a", "--db", str(db)]).exit_code == 0
    out = runner.invoke(app, ["runs", "--db", str(db), "--format", "json"])
    assert '"a"' not in out.stdout and '"b"' in out.stdout
