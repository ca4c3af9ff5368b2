"""One suite over both stores: what a stored run answers equals what ``ctda analyze`` says.

Every test runs against a real LadybugDB file and a real Neo4j 5.26 server (the session
fixture); nothing is mocked. The fixtures here are shared with the other store tests.
"""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.analysis.report import Report
from ctda.analysis.report import build as analysis_report
from ctda.ingest.errors import TraceError
from ctda.ingest.reader import read_trace
from ctda.queries import loader
from ctda.store import StoreError, open_store, schema
from ctda.store import report as store_report
from ctda.store.config import Target
from ctda.store.ingest import Ingested, ingest
from tests.conftest import CORPUS, DATA
from tests.neo4j_fixture import neo4j_server  # noqa: F401

if TYPE_CHECKING:
    from scripts.neo4j_server import ServerInfo

STORES = ["ladybug", pytest.param("neo4j", marks=pytest.mark.neo4j)]
SMALL = DATA / "hta" / "simple_add_param_benchmark.json.gz"
STEPS = DATA / "hta" / "cpu_only_gloo_rank34_full.json.gz"  # 5 ProfilerSteps, CPU only
SHIPPED = sorted(p for p in DATA.glob("*/*.json.gz") if "HTA_OUTPUT" not in p.name)
HOSTILE = "x' OR 1=1 // \"}) DETACH DELETE n"
ALL = 10**6
#: the corpus traces read back from both stores (and replayed in Neo4j by ``test_indb``)
CORPUS_RUNS = ("hta/ddp_nccl_allreduce_ws2_rank0.json.gz", "generated/e_cnn_bgthread_before.pt.trace.json.gz")
#: the gloo trace again, analysed without the GIL rule: no contention model (``test_indb``)
NOGIL = "cpu_only_gloo_rank34_full.json.gz#nogil"


def wipe(target: Target) -> None:
    """Empty a Neo4j database between tests (the server is shared by the session)."""
    import neo4j

    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver, driver.session() as s:
        s.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS").consume()


def neo4j_target(info: ServerInfo) -> Target:
    return Target("neo4j", info.uri, (info.user, info.password))


@pytest.fixture(params=STORES)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """A fresh, empty store of each kind."""
    if request.param == "ladybug":
        return Target("ladybug", str(tmp_path / "store.lbug"))
    t = neo4j_target(request.getfixturevalue("neo4j_server"))
    wipe(t)
    return t


def store_ingest(target: Target, path: Path, **kw: Any) -> Ingested:
    return ingest(path, target, kw.pop("options", AnalysisOptions()), **kw)


def counts(target: Target) -> dict[str, int]:
    """Nodes per label and relationships per type: what 'store unchanged' compares."""
    labels = ("Run", "Event", "Window", "Segment", "Scenario", "Blob")
    labels += tuple(x.name for x in schema.BREAKDOWN_LABELS.values())
    rels = ("DEP", "CP", "HAS_WINDOW", "HAS_SEGMENT", "HAS_SCENARIO")
    if target.kind == "ladybug" and not Path(target.location).exists():
        return dict.fromkeys(labels + rels, 0)
    if target.kind == "neo4j":  # a run being written holds its nodes under staging labels
        labels += tuple(schema.staged(x) for x in labels)
    with open_store(target, read_only=True) as s:
        # the store's own reads: every node and relationship, whatever a user's query may see
        out = {}
        for label in labels:
            out[label] = int(s._read(f"MATCH (n:{label}) RETURN count(n) AS n")[0]["n"])
        for rel in rels:
            out[rel] = int(s._read(f"MATCH ()-[r:{rel}]->() RETURN count(r) AS n")[0]["n"])
        return out


def _norm(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    df = df.copy()
    for c in df.columns:
        if df[c].dtype.kind == "f":
            df[c] = df[c].astype(float).round(9)
        elif df[c].dtype.kind in "iu":
            df[c] = df[c].astype(np.int64)
    return df.sort_values(keys).reset_index(drop=True)


def near_critical(a: Analysis, step: str, top: int) -> pd.DataFrame:
    """The report's near-critical table, with "on the path" as the store defines it.

    The report counts an event as on the path when a path edge starts or ends at it; the
    store also counts events the path charges time to (a caller whose self-time segments
    between its callees are on the path), so those never show up as near-critical.
    """
    from ctda.analysis.report import select_windows
    from ctda.analysis.tables import display_names, lane_labels
    from ctda.ingest.kinds import Kind

    n, g, ch = a.nodes.n, a.graph, a.charges
    on = np.zeros(n + 2, dtype=bool)
    on[np.minimum(g.src[ch.edge] // 2, n)] = True
    on[np.minimum(g.dst[ch.edge] // 2, n)] = True
    on[ch.event[ch.event >= 0]] = True
    starts, ends = a.window_bounds()
    inside = np.zeros(n, dtype=bool)
    for i in select_windows(a, step):
        inside |= (a.nodes.ts >= starts[i]) & (a.nodes.ts < ends[i])
    slack = a.timing.slack[0 : 2 * n : 2]
    dur = a.nodes.end - a.nodes.ts
    cand = np.flatnonzero(inside & ~on[:n] & (a.nodes.kind != Kind.USER_ANNOTATION) & (dur > 0))
    order = cand[np.lexsort((-dur[cand], slack[cand]))][:top]
    labels = lane_labels(a)
    return pd.DataFrame(
        {
            "name": display_names(a)[order],
            "slack_ns": slack[order],
            "duration_ns": dur[order],
            "lane": [labels.get(int(x), "") for x in a.nodes.lane[order]],
        }
    )


def assert_same_report(got: Report, want: Report) -> None:
    """Every table the two reports share, row for row (order among ties may differ).

    Near-critical events are compared by :func:`check_report` (see :func:`near_critical`).
    """
    for table, keys in (
        ("steps", ["window", "start_ms"]),
        ("by_class", ["class"]),
        ("hotspots", ["name"]),
        ("by_category", ["category"]),
        ("by_lane", ["lane"]),
    ):
        pd.testing.assert_frame_equal(
            _norm(getattr(got, table), keys), _norm(getattr(want, table), keys), check_dtype=False, obj=table
        )
    assert got.recommendations == want.recommendations
    assert got.total_ns == want.total_ns
    assert got.checks == want.checks
    assert got.graph["edges"] == want.graph["edges"]


def cp_listing(target: Target, run: str, step: int = -1) -> pd.DataFrame:
    with open_store(target, read_only=True) as s:
        res = loader.run(s, "cp_listing", run=run, step=step)
    return pd.DataFrame(res.rows, columns=res.columns)


def assert_same_paths(target: Target, run: str, a: Analysis) -> None:
    """The stored per-window critical paths are the engine's charges, in order."""
    got = cp_listing(target, run)
    ch = a.charges
    assert len(got) == len(ch)
    np.testing.assert_array_equal(got["idx"].to_numpy(), ch.window.to_numpy())
    np.testing.assert_array_equal(got["edge"].to_numpy(), ch.edge.to_numpy())
    np.testing.assert_array_equal(got["ns"].to_numpy(), ch.ns.to_numpy())
    charged = ch.event.to_numpy()
    np.testing.assert_array_equal(got["event"].to_numpy()[charged >= 0], charged[charged >= 0])
    assert (got["wait"].to_numpy() == (charged < 0)).all()
    pos = got.groupby("idx")["pos"].apply(lambda s: (s.to_numpy() == np.arange(len(s))).all())
    assert pos.all()


def check_report(target: Target, run: str, a: Analysis, step: str = "all", top: int = ALL) -> None:
    with open_store(target, read_only=True) as s:
        got = store_report.build(s, run, step=step, top=top)
    assert_same_report(got, analysis_report(a, step=step, top=top))
    keys = ["slack_ns", "duration_ns", "name", "lane"]
    pd.testing.assert_frame_equal(
        _norm(got.near_critical, keys),
        _norm(near_critical(a, step, top), keys),
        check_dtype=False,
        obj="near_critical",
    )


def check_trace(target: Target, path: Path, run: str) -> None:
    done = store_ingest(target, path, name=run)
    assert done.stored and done.analysis is not None
    check_stored(target, run, done.analysis)


def check_stored(target: Target, run: str, a: Analysis) -> None:
    """The stored run's reports (all steps, a top 5, a middle step) and paths are the engine's."""
    check_report(target, run, a)
    check_report(target, run, a, top=5)
    steps = [w.step for w in a.windows if w.step is not None]
    if steps:
        check_report(target, run, a, step=str(steps[len(steps) // 2]))
    assert_same_paths(target, run, a)


@dataclasses.dataclass(frozen=True)
class Shipped:
    """The Neo4j server holding every shipped trace and the corpus runs, each stored once."""

    target: Target
    runs: dict[str, Analysis]  # run name -> the analysis its ingest stored
    ids: dict[str, int]  # run name -> run id: what the server holds while nothing emptied it


_SHIPPED: dict[str, Shipped] = {}


def shipped_in_neo4j(t: Target) -> Shipped:
    """Every shipped trace, the corpus runs (where present) and the gloo trace without the
    GIL rule, ingested into the emptied server ``t`` once for the session: the store suite
    and the in-database what-if tests read the same runs (Neo4j ingests are the slow part of
    both). A later call finds them still there, or (a test emptied the server since) ingests
    them again; conftest runs the readers back to back so that this does not happen."""
    have = _SHIPPED.get(t.location)
    if have is not None:
        with open_store(t, read_only=True) as s:
            if {r.name: r.id for r in s.runs()} == have.ids:
                return have
    wipe(t)
    todo = [(path, path.name, AnalysisOptions()) for path in SHIPPED]
    todo += [(CORPUS / rel, Path(rel).name, AnalysisOptions()) for rel in CORPUS_RUNS if CORPUS is not None]
    no_gil = AnalysisOptions(cross_thread=("backward_join", "cuda_lock", "fwdbwd"))
    todo.append((DATA / "hta" / NOGIL.split("#")[0], NOGIL, no_gil))
    runs, ids = {}, {}
    for path, name, options in todo:
        if path.is_file():
            done = ingest(path, t, options, name=name)
            assert done.stored and done.analysis is not None, name
            runs[name], ids[name] = done.analysis, done.run.id
    assert len(runs[NOGIL].contention) == 0
    _SHIPPED[t.location] = Shipped(t, runs, ids)
    return _SHIPPED[t.location]


@pytest.mark.parametrize("store", STORES)
def test_shipped_traces_match_analyze(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Every shipped trace in one store: the same hotspots, bound-by and paths as analyze."""
    if store == "ladybug":
        t = Target("ladybug", str(tmp_path / "store.lbug"))
        for path in SHIPPED:
            check_trace(t, path, f"{path.parent.name}/{path.name}")
        with open_store(t, read_only=True) as s:
            assert sorted(r.name for r in s.runs()) == sorted(f"{p.parent.name}/{p.name}" for p in SHIPPED)
        return
    shipped = shipped_in_neo4j(neo4j_target(request.getfixturevalue("neo4j_server")))
    for path in SHIPPED:
        check_stored(shipped.target, path.name, shipped.runs[path.name])
    with open_store(shipped.target, read_only=True) as s:
        assert sorted(r.name for r in s.runs()) == sorted(shipped.runs)


@pytest.mark.corpus
@pytest.mark.skipif(CORPUS is None, reason="shared trace corpus not found")
@pytest.mark.parametrize("rel", CORPUS_RUNS)
@pytest.mark.parametrize("store", STORES)
def test_corpus_traces_match_analyze(
    store: str, rel: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    assert CORPUS is not None
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"{rel} not in the corpus")
    if store == "ladybug":
        check_trace(Target("ladybug", str(tmp_path / "store.lbug")), path, path.name)
        return
    shipped = shipped_in_neo4j(neo4j_target(request.getfixturevalue("neo4j_server")))
    check_stored(shipped.target, path.name, shipped.runs[path.name])


def test_named_queries_answer(target: Target) -> None:
    """Each named query runs on the store and answers about the right things."""
    a = store_ingest(target, STEPS, name="r").analysis
    assert a is not None
    ch = a.charges
    edge = int(ch.edge.iloc[len(ch) // 2])
    event = int(ch.event[ch.event >= 0].iloc[len(ch) // 3])
    with open_store(target, read_only=True) as s:
        for q in loader.load_all().values():
            if q.name.startswith(("whatif_", "replay_", "breakdown_", "job_")) or q.writes:
                continue  # what-ifs, in-db what-ifs, breakdowns (a CPU-only trace), jobs: tested with them
            params: dict[str, Any] = {"run": "r", "edge": edge, "event": event}
            res = loader.run(
                s, q.name, **{k: v for k, v in params.items() if k in {p.name for p in q.params}}
            )
            assert res.rows, q.name
        prov = loader.run(s, "edge_provenance", run="r", edge=edge).records()
        assert len(prov) == 1
        g = a.graph
        assert prov[0]["rule"] == g.rule_names[g.rule[edge]]
        assert prov[0]["rule_doc"]
        assert prov[0]["from_event"] == min(g.src[edge] // 2, a.nodes.n)
        hood = loader.run(s, "event_neighbourhood", run="r", event=event, k=2).records()
        assert any(r["offset"] == 0 and r["event"] == event for r in hood)
        assert all(abs(r["offset"]) <= 2 for r in hood)
        deps = loader.run(s, "event_deps", run="r", event=event).records()
        assert {r["direction"] for r in deps} == {"in", "out"}
        n_in = int(np.sum(g.dst // 2 == event) - 0)
        assert sum(r["direction"] == "in" for r in deps) == n_in
        by = loader.run(s, "bound_by", run="r").records()
        for w in range(len(a.windows)):
            assert sum(r["cp_ns"] for r in by if r["idx"] == w) == int(ch[ch.window == w].ns.sum())


def test_breakdowns_are_stored_and_queried(target: Target) -> None:
    """The breakdown queries answer what `ctda breakdown` computes; they leave with the run."""
    from ctda.analysis.breakdowns import Breakdowns

    trace = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"
    a = store_ingest(target, trace, name="r").analysis
    assert a is not None
    b = Breakdowns(a)
    with open_store(target, read_only=True) as s:
        temporal = loader.run(s, "breakdown_temporal", run="r").records()
        idle = loader.run(s, "breakdown_idle", run="r").records()
        kernels = loader.run(s, "breakdown_kernels", run="r", top=ALL).records()
    want = b.temporal.sort_values(
        ["window", "device"], key=lambda c: c.where(c >= 0, 10**9) if c.name == "window" else c
    )
    assert [(r["window"], r["device"], r["span_ns"], r["compute_ns"], r["idle_ns"]) for r in temporal] == [
        (int(w), int(d), int(sp), int(c), int(i))
        for w, d, sp, c, i in want[["window", "device", "span_ns", "compute_ns", "idle_ns"]].itertuples(
            index=False
        )
    ]
    assert sorted((r["window"], r["stream"], r["idle"], r["idle_ns"], r["cp_ns"]) for r in idle) == sorted(
        (int(w), int(st), k, int(n), int(c))
        for w, st, k, n, c in b.idle[["window", "stream", "idle", "idle_ns", "cp_ns"]].itertuples(index=False)
    )
    assert idle and sum(r["cp_ns"] for r in idle if r["window"] >= 0) > 0
    assert sorted((r["name"], r["count"], r["total_ns"], r["cp_ns"]) for r in kernels) == sorted(
        (n, int(c), int(t), int(cp))
        for n, c, t, cp in b.kernels[["name", "count", "total_ns", "cp_ns"]].itertuples(index=False)
    )
    launches = b.table("launches")
    with open_store(target, read_only=True) as s:
        stored = loader.run(s, "breakdown_launches", run="r").records()
    assert [(r["window"], r["launches"], r["cp_delay_ns"], r["longest_queue"]) for r in stored] == [
        (int(w), int(n), int(cp), int(b.table("queues").query("window == @w").max_length.max()))
        for w, n, cp in launches[["window", "launches", "cp_delay_ns"]].itertuples(index=False)
    ]
    with open_store(target) as s:
        assert s.delete_run("r")
    left = counts(target)
    assert all(left[label.name] == 0 for label in schema.BREAKDOWN_LABELS.values())


def test_idempotent_ingest(target: Target) -> None:
    first = store_ingest(target, SMALL)
    assert first.stored and first.run.name == "simple_add_param_benchmark"
    before = counts(target)
    again = store_ingest(target, SMALL)
    assert not again.stored and again.run.id == first.run.id
    assert counts(target) == before
    # another name, same bytes and options: still the same run
    assert not store_ingest(target, SMALL, name="other").stored
    # other options are another analysis of the same file
    other = store_ingest(target, SMALL, name="nox", options=AnalysisOptions(cross_thread=()))
    assert other.stored
    forced = store_ingest(target, SMALL, force=True)
    assert forced.stored and forced.run.id != first.run.id
    with open_store(target, read_only=True) as s:
        assert sorted(r.name for r in s.runs()) == ["nox", "simple_add_param_benchmark"]
    assert counts(target) == {k: 2 * v if k != "Run" else 2 for k, v in before.items()} | {"Run": 2}


def test_name_clash_needs_force(target: Target) -> None:
    store_ingest(target, SMALL, name="r")
    before = counts(target)
    with pytest.raises(StoreError, match="already holds"):
        store_ingest(target, STEPS, name="r")
    assert counts(target) == before
    replaced = store_ingest(target, STEPS, name="r", force=True)
    assert replaced.stored
    with open_store(target, read_only=True) as s:
        (run,) = s.runs()
        assert run.name == "r" and run.file.endswith(STEPS.name) and run.events == 7479


def test_delete_run(target: Target) -> None:
    store_ingest(target, SMALL, name="a")
    keep = store_ingest(target, STEPS, name="b").run
    with open_store(target) as s:
        assert s.delete_run("a")
        assert not s.delete_run("a")
        assert [r.name for r in s.runs(include_incomplete=True)] == ["b"]
        n_events = s.query("MATCH (e:Event) RETURN count(e)").rows[0][0]
        assert n_events == keep.events + 2  # + SOURCE and SINK
        assert s.query("MATCH (w:Window) RETURN count(w)").rows[0][0] == keep.steps


def test_hostile_run_name(target: Target) -> None:
    """Quotes and Cypher keywords in a run name are data, never query text."""
    store_ingest(target, SMALL, name="plain")
    done = store_ingest(target, STEPS, name=HOSTILE)
    assert done.stored and done.analysis is not None
    with open_store(target, read_only=True) as s:
        assert sorted(r.name for r in s.runs()) == sorted(["plain", HOSTILE])
    check_report(target, HOSTILE, done.analysis)
    with open_store(target, read_only=True) as s:
        hot = loader.run(s, "hotspots_by_name", run=HOSTILE, top=3).rows
        assert len(hot) == 3
    with open_store(target) as s:
        assert s.delete_run(HOSTILE)
        assert [r.name for r in s.runs()] == ["plain"]


def test_bad_input_leaves_store_unchanged(target: Target, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, '))
    missing = tmp_path / "missing.json"
    before = counts(target)
    for path in (bad, missing):
        with pytest.raises(TraceError):
            store_ingest(target, path)
    assert counts(target) == before
    if target.kind == "ladybug":
        assert not Path(target.location).exists()  # not even created


def test_read_only_queries(target: Target) -> None:
    store_ingest(target, SMALL, name="r")
    with open_store(target, read_only=True) as s, pytest.raises(StoreError):
        s.query("MATCH (r:Run) SET r.name = 'hijacked' RETURN r")
    with open_store(target) as s:
        assert s.query("MATCH (r:Run) SET r.steps = r.steps RETURN count(r)", write=True).rows == [[1]]
        assert s.find_run("r") is not None


def test_report_errors(target: Target) -> None:
    store_ingest(target, STEPS, name="r")
    with open_store(target, read_only=True) as s:
        with pytest.raises(StoreError, match="no run"):
            store_report.build(s, "nope")
        with pytest.raises(StoreError, match="no ProfilerStep#999"):
            store_report.build(s, "r", step="999")


def test_analysis_of_stored_file_is_reproducible(target: Target) -> None:
    """Provenance: file, digest, version and options are stored with the run."""
    done = store_ingest(target, STEPS, options=AnalysisOptions(cross_thread=("fwdbwd",)))
    run = done.run
    assert run.file == str(STEPS) and len(run.sha256) == 64 and run.ctda_version
    assert run.options["cross_thread"] == ["fwdbwd"] and run.options["windows"] == "steps"
    again = analyze(read_trace(run.file), AnalysisOptions(cross_thread=tuple(run.options["cross_thread"])))
    assert int(again.charges.ns.sum()) == run.cp_ns
    assert run.step_ns == [int(x) for x in np.diff(np.stack(again.window_bounds()), axis=0)[0]]
