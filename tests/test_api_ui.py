"""What the UI asks of a store through ``ctda.api`` (``ctda/api_ui.py``): where the store is,
whether it changed, and a run's analysis, from its snapshot or, without one, its trace."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctda import api
from ctda.store import open_store, runs

TINY = Path(__file__).parent / "data" / "hta" / "cuda_event_sync_tiny.json.gz"


def test_store_facts_say_where_the_store_is_and_what_serves_it(tmp_path: Path) -> None:
    db = tmp_path / "deep" / "runs.lbug"
    facts = api.store_facts(str(db))
    assert (facts.location, facts.title, facts.dialect, facts.folder) == (
        str(db),
        "Ladybug",
        "ladybug",
        db.parent,
    )
    server = api.store_facts("bolt://user:secret@localhost:7687")
    assert (server.title, server.dialect, server.folder) == ("Neo4j", "neo4j", None)
    assert "secret" not in server.location


def test_the_stamp_moves_only_when_the_store_is_written(tmp_path: Path) -> None:
    db = tmp_path / "runs.lbug"
    with api.open_store(db) as s:
        s.ingest(TINY, run="a")
    first = api.store_stamp(str(db))
    with api.open_store(db) as s:
        assert [r.name for r in s.runs()] == ["a"]  # a read leaves the files alone
    assert api.store_stamp(str(db)) == first
    with api.open_store(db) as s:
        s.rm("a")
    assert api.store_stamp(str(db)) > first
    # a server's stamp is the clock in 2 s steps
    before = int(time.time() / 2)
    assert before <= api.store_stamp("bolt://localhost:7687") <= before + 1


def test_a_run_without_its_snapshot_is_analysed_again_from_its_trace(tmp_path: Path) -> None:
    db = tmp_path / "runs.lbug"
    trace = tmp_path / "tiny.json.gz"
    trace.write_bytes(TINY.read_bytes())
    with api.open_store(db) as s:
        s.ingest(trace, run="a")
        (info,) = s.runs()
    snap = api.load_run(str(db), info)
    assert snap.source == "snapshot" and snap.stored.info.id == info.id
    with open_store(str(db)) as store:
        store._write(
            "MATCH (b:Blob) WHERE b.run_id = $r AND b.name = $n DELETE b",
            {"r": info.id, "n": runs.SNAPSHOT_KEY},
        )
    runs._CACHE.clear()  # the process keeps the snapshots it read
    again = api.load_run(str(db), info)
    assert again.source == "trace file"
    assert again.analysis.nodes.n == snap.analysis.nodes.n
    assert api.report(again.analysis).steps.equals(api.report(snap.analysis).steps)
    assert api.report(again.analysis).total_ns > 0
    trace.unlink()
    with pytest.raises(api.StoreError, match=r"run 'a' has no analysis snapshot .* is gone; re-ingest it"):
        api.load_run(str(db), info)
