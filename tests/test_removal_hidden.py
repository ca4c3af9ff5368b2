"""A run being removed (``ctda rm``, or replaced by ``--force``) is never seen half removed.

A real remover process is stopped part way through its removal (the store's removal stall
hook, after some steps) while another reader counts what raw queries see, then killed. On
Neo4j the transaction that marks the run ``deleting`` (the rm's first, or the flip of the
run replacing it) gives its nodes back their staging labels, so the reader already sees
nothing of it while most of it is still there; on the embedded store the removal is one
transaction, so the reader still sees all of it. Either way: the whole run or nothing.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctda.store import open_store, schema
from ctda.store.config import Target
from ctda.store.faults import STALL_MARK, STALL_REMOVAL_ENV
from tests.neo4j_fixture import neo4j_server  # noqa: F401
from tests.test_store_suite import neo4j_target, store_ingest, wipe

pytest.importorskip("ladybug")

DATA = Path(__file__).parent / "data" / "hta"
KEPT = DATA / "cuda_event_sync_tiny.json.gz"
VICTIM = DATA / "simple_add_param_benchmark.json.gz"
NEW = DATA / "rocm62_mi250_minitoy_train.json.gz"  # what replaces the victim
REPO = Path(__file__).resolve().parents[1]
#: what a raw query counts, anchored on visible labels (as a user would)
COUNTS = {
    "runs": "MATCH (r:Run) RETURN count(r) AS n",
    "events": "MATCH (e:Event) RETURN count(e) AS n",
    "deps": "MATCH (:Event)-[d:DEP]->() RETURN count(d) AS n",
    "segments": "MATCH (g:Segment) RETURN count(g) AS n",
    "paths": "MATCH (:Segment)-[c:CP]->(e:Event) RETURN count(c) AS n",
    "windows": "MATCH (w:Window) RETURN count(w) AS n",
    "scenarios": "MATCH (s:Scenario) RETURN count(s) AS n",
    "blobs": "MATCH (b:Blob) RETURN count(b) AS n",
}
REMOVER = {
    "rm": "from ctda.store import open_store\nwith open_store(t) as s: s.delete_run('victim')\n",
    "replace": (
        "from ctda.analysis.engine import AnalysisOptions; from ctda.store.ingest import ingest\n"
        f"ingest(Path({str(NEW)!r}), t, AnalysisOptions(), name='victim', force=True)\n"
    ),
}


def counts(t: Target) -> dict[str, int]:
    """What a reader's raw queries count (through the query gate, as ``ctda query`` does)."""
    with open_store(t, read_only=True) as s:
        return {name: int(s.query(text).rows[0][0]) for name, text in COUNTS.items()}


def _remover(t: Target, mode: str) -> subprocess.Popen[str]:
    """A real removal of run ``victim``, stalled (alive) after its first committed step."""
    code = (
        "import sys; from pathlib import Path; from ctda.store.config import Target\n"
        "t = Target(sys.argv[1], sys.argv[2], tuple(sys.argv[3:5]) or None)\n" + REMOVER[mode]
    )
    env = dict(os.environ, **{STALL_REMOVAL_ENV: "1"})
    return subprocess.Popen(
        [sys.executable, "-c", code, t.kind, t.location, *(t.auth or ())],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(params=["ladybug", "neo4j"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "ladybug":
        return Target("ladybug", str(tmp_path / "store.lbug"))
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    return t


def _victim_nodes(t: Target, rid: int) -> int:
    """Every node run ``rid`` still owns, under either label (the store's own read)."""
    with open_store(t, read_only=True) as s:
        return int(s._read("MATCH (n) WHERE n.run_id = $r RETURN count(n) AS n", {"r": rid})[0]["n"])


@dataclasses.dataclass
class Stalled:
    """A store whose run ``victim`` a remover left part way, and what was there before."""

    target: Target
    mode: str
    kept: dict[str, int]  # counts with run ``kept`` alone
    both: dict[str, int]  # and with ``victim`` beside it
    victim_id: int
    victim_nodes: int  # every node ``victim`` owned
    remover: subprocess.Popen[str] | None = None

    def kill(self) -> None:
        if self.remover is not None:
            self.remover.kill()
            self.remover.wait()


@pytest.fixture
def stalled(store: Target, request: pytest.FixtureRequest) -> Iterator[Stalled]:
    """Runs ``kept`` and ``victim`` stored, and a remover of ``victim`` stopped part way."""
    store_ingest(store, KEPT, name="kept")
    kept = counts(store)
    store_ingest(store, VICTIM, name="victim")
    with open_store(store, read_only=True) as s:
        rid = next(r.id for r in s.runs() if r.name == "victim")
    seen = Stalled(store, request.param, kept, counts(store), rid, _victim_nodes(store, rid))
    proc = seen.remover = _remover(store, seen.mode)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if STALL_MARK in line:
                break
        assert proc.poll() is None, "the remover ended before the stall hook"
        yield seen
    finally:
        seen.kill()


@pytest.mark.parametrize("stalled", ["rm", "replace"], indirect=True)
def test_a_run_being_removed_is_whole_or_gone(stalled: Stalled) -> None:
    t, rid = stalled.target, stalled.victim_id
    during = counts(t)
    left = _victim_nodes(t, rid)
    if t.kind == "neo4j":
        # half removed: some of the victim is gone, the rest is still there, staged
        assert 0 < left < stalled.victim_nodes, (left, stalled.victim_nodes)
        with open_store(t, read_only=True) as s:
            staged = f"MATCH (e:{schema.staged('Event')}) WHERE e.run_id = $r RETURN count(e) AS n"
            assert int(s._read(staged, {"r": rid})[0]["n"]) > 0
    else:  # one open transaction: the reader sees the store as it was before it
        assert left == stalled.victim_nodes
    stalled.kill()
    with open_store(t) as s:  # the next writer removes what the killed remover left
        s.gc()
        names = sorted(r.name for r in s.runs(include_incomplete=True))
    assert names == (["kept"] if stalled.mode == "rm" else ["kept", "victim"])
    after = counts(t)
    assert _victim_nodes(t, rid) == 0
    victim = {k: stalled.both[k] - stalled.kept[k] for k in COUNTS}
    assert all(victim.values()), victim  # the victim has something of every kind to hide
    if t.kind == "neo4j":  # nothing of the old victim: as after its removal
        assert during == after, (during, after)
    else:  # all of it: as before the removal (and the replacing run beside it)
        assert during == {k: after[k] + victim[k] for k in COUNTS}, (during, after, victim)
