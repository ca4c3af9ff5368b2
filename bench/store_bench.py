"""Store write speed: rows/s into each store, and what the store engine itself allows.

``run(quick) -> list[dict]`` is the hook :mod:`bench.suite_store` calls; ``python -m
bench.store_bench [--quick]`` prints the rows as JSON lines.

*Write rows* (``kind: write``), one per (store, trace, pass): the time of
:meth:`ctda.store.base.Store.write_run` alone (the trace is read and analysed first,
untimed). ``rows`` is analysed events + dependency edges (the figure the goals are set
on); ``all_rows`` adds what the same write also stores, each window's critical path
(``CP`` relationships) and the windows. Every trace is written twice, as two runs (the
store keeps both). Ladybug: a store per trace, so pass 1 loads an empty store and pass 2
appends to a store holding a run. Neo4j: one server for all traces; pass 1 meets a
freshly started server whose JIT compiler has not yet seen the write path, pass 2 is the
steady state of a running team server. After pass 2 the report ``ctda report`` prints is
read back from the store and timed (``report_s``).

*Floor rows* (``kind: floor``): the same events and edges written by the same bulk path
(Ladybug: one COPY per table into a fresh database; Neo4j: the store's own columnar UNWIND
batches on its parallel sessions, into scratch labels), with keys only (the engine's own
speed on this machine, an upper bound for any data model) and with every Event and DEP
property the model keeps but nothing else (what those columns cost on their own).

Inputs: quick, the largest shipped trace; full, the largest trace of the shared corpus and
a synthetic trace of >= 1M events made by :mod:`bench.replicate` (cached in bench/.cache).
Neo4j: ``$CTDA_BENCH_NEO4J_URI`` (credentials from ``CTDA_NEO4J_USER`` /
``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``; the bench removes the runs it wrote and takes
no floor there), else a private server started with ``scripts/neo4j_server.py`` (needs
Java 17+), else the Neo4j rows say why they are missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from bench.child import cpu_seconds

REPO = Path(__file__).resolve().parents[1]
GOALS = {"ladybug": 1_000_000, "neo4j": 100_000}  # rows/s
PASSES = 2
SHIPPED = REPO / "tests" / "data" / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"
SYNTH_SOURCE = "hta/ddp_nccl_allreduce_ws2_rank0.json.gz"
SYNTH_EVENTS = 1_000_000
#: the private benchmark server gets more memory than the test servers
NEO4J_CONF = {
    "server.memory.heap.initial_size": "2g",
    "server.memory.heap.max_size": "2g",
    "server.memory.pagecache.size": "2g",
}


@dataclasses.dataclass
class Neo4jTarget:
    """Where the Neo4j rows are measured; ``private`` servers may take scratch writes."""

    target: Any = None
    pgid: int | None = None
    note: str = ""
    private: bool = False


def _log(msg: str) -> None:
    print(f"store_bench: {msg}", file=sys.stderr, flush=True)


def _proc_cpu(pgid: int) -> float | None:
    """CPU seconds of a process group (the Neo4j server we started), from /proc."""
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of stat: process group
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def inputs(quick: bool) -> list[tuple[str, Path]]:
    """(label, trace) pairs to measure."""
    if quick:
        return [(f"shipped {SHIPPED.name}", SHIPPED)]
    from bench import corpus

    out: list[tuple[str, Path]] = []
    cdir = corpus.corpus_dir(REPO)
    if cdir is None:
        _log("shared corpus not found: measuring the shipped trace instead")
        return [(f"shipped {SHIPPED.name}", SHIPPED)]
    (big,) = corpus.largest(corpus.corpus_traces(cdir), 1)
    out.append((f"corpus {big.relative_to(cdir)}", big))
    syn = corpus.synthetic(
        cdir / SYNTH_SOURCE, REPO / "bench" / ".cache", min_events=SYNTH_EVENTS, min_bytes=0, log=_log
    )
    out.append((f"synthetic {syn.source} x{syn.copies} ({syn.n_events:,} events)", syn.path))
    return out


def _server_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ctda_bench_neo4j_server", REPO / "scripts" / "neo4j_server.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@contextmanager
def neo4j_target() -> Iterator[Neo4jTarget]:
    """The server the Neo4j rows are measured on, or why there is none."""
    from ctda.store.config import Target, resolve

    uri = os.environ.get("CTDA_BENCH_NEO4J_URI")
    if uri:
        yield Neo4jTarget(resolve(uri), None, f"server {resolve(uri).location}")
        return
    server = _server_module()
    major = server.java_major_version("java")
    if major is None or major < server.MIN_JAVA:
        yield Neo4jTarget(note="no Java 17+: Neo4j not measured")
        return
    with tempfile.TemporaryDirectory(prefix="ctda-bench-neo4j-") as d:
        try:
            info = server.start(data_dir=Path(d), extra_conf=NEO4J_CONF, plugins=True)
        except server.Neo4jServerError as exc:
            yield Neo4jTarget(note=f"Neo4j not measured: {str(exc).splitlines()[0]}")
            return
        try:
            note = "private Neo4j 5.26 server on this machine (heap 2g, page cache 2g)"
            target = Target("neo4j", info.uri, (info.user, info.password))
            yield Neo4jTarget(target, info.pid, note, private=True)
        finally:
            server.stop(info)


def measure(fn: Callable[[], object], pgid: int | None = None) -> dict[str, Any]:
    """Time ``fn``; CPU of this process and (if known) of the server."""
    server0 = _proc_cpu(pgid) if pgid else None
    c0, t0 = cpu_seconds()[0], time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    row: dict[str, Any] = {"seconds": seconds, "client_cpu_s": cpu_seconds()[0] - c0}
    if server0 is not None and pgid:
        server1 = _proc_cpu(pgid)
        row["server_cpu_s"] = None if server1 is None else server1 - server0
    return row


# --- floors: keys only, same bulk path ------------------------------------------------
def floor_ladybug(data: Any, workdir: Path, *, properties: bool = False) -> dict[str, Any]:
    """COPY the run's events and edges into a fresh database: keys only, or with properties.

    With ``properties`` the tables are the store's own Event and DEP (every property the
    model keeps), still without critical paths, windows and snapshot: what the model's
    columns cost on their own.
    """
    import ladybug

    from ctda.store import schema
    from ctda.store.ladybug_store import ddl

    keyed = data.keyed(1)
    events, edges = keyed["Event"], keyed["DEP"]
    node, rel = ("Event", "DEP") if properties else ("BareEvent", "BareDep")
    if not properties:
        events, edges = events.select(["key"]), edges.select(["from", "to"])
    db = ladybug.Database(str(workdir / ("model.lbug" if properties else "floor.lbug")))
    conn = ladybug.Connection(db)
    try:
        if properties:
            conn.execute(ddl(schema.EVENT))
            conn.execute(ddl(schema.DEP))
        else:
            conn.execute("CREATE NODE TABLE BareEvent(key INT64, PRIMARY KEY (key))")
            conn.execute("CREATE REL TABLE BareDep(FROM BareEvent TO BareEvent)")

        def load() -> None:
            conn.execute(f"COPY {node} FROM $t", {"t": events})
            conn.execute(f"COPY {rel} FROM $t", {"t": edges})

        return measure(load)
    finally:
        conn.close()
        db.close()


def floor_neo4j(data: Any, target: Any, pgid: int | None, *, properties: bool = False) -> dict[str, Any]:
    """Events and edges through the store's own batched parallel writes, into scratch labels.

    Keys only, or (``properties``) with every Event and DEP property the model keeps; the
    scratch labels have no constraint or index, so this is an upper bound either way.
    """
    import pyarrow as pa

    from ctda.store import schema
    from ctda.store.neo4j_store import Neo4jStore

    if properties:
        keyed = data.keyed(1)
        nodes, edges = keyed["Event"], keyed["DEP"]
        node = schema.Label("BenchNode", schema.EVENT.props)
        rel = schema.Label("BENCH_EDGE", schema.DEP.props, ("BenchNode", "BenchNode"))
    else:
        nodes, edges = (
            pa.table({"key": np.arange(data.events.num_rows, dtype=np.int64)}),
            data.deps.select([]),
        )
        node = schema.Label("BenchNode", (("key", "INT64"),))
        rel = schema.Label("BENCH_EDGE", (), ("BenchNode", "BenchNode"))
    src, dst = (data.deps.column(c).to_numpy() for c in ("src", "dst"))
    store = Neo4jStore(target.location, target.auth)
    try:

        def load() -> None:
            ids = store._nodes(node, nodes, lambda rows: None)
            store._rels(rel, edges, ids[src], ids[dst], lambda rows: None)

        row = measure(load, pgid)
        with store._session() as s:
            s.run("MATCH (b:BenchNode) CALL (b) { DETACH DELETE b } IN TRANSACTIONS OF 5000 ROWS").consume()
    finally:
        store.close()
    return row


# --- the measurements -----------------------------------------------------------------
def _prepare(quick: bool) -> list[tuple[str, Any]]:
    from ctda.analysis import snapshot
    from ctda.analysis.engine import analyze
    from ctda.ingest.reader import read_trace
    from ctda.store.model import build

    prepared = []
    for label, path in inputs(quick):
        _log(f"reading and analysing {path.name}")
        a = analyze(read_trace(path))
        data = build(a, "bench", str(path), "0" * 64)
        data.blobs["snapshot"] = snapshot.dump(a)
        prepared.append((label, data))
        del a
    return prepared


def _row(store: str, label: str, data: Any, kind: str, extra: dict[str, Any]) -> dict[str, Any]:
    rows = data.events.num_rows + data.deps.num_rows
    out = {
        "suite": "store",
        "kind": kind,
        "store": store,
        "trace": label,
        "events": data.events.num_rows,
        "edges": data.deps.num_rows,
        "cp_rels": data.cp.num_rows,
        "windows": data.windows.num_rows,
        "rows": rows,
        "all_rows": rows + data.cp.num_rows + data.windows.num_rows,
        "goal_rows_per_s": GOALS[store],
        "load_avg": os.getloadavg()[0],
        **extra,
    }
    if "seconds" in extra:
        out["rows_per_s"] = rows / extra["seconds"]
        if kind == "write":
            out["all_rows_per_s"] = out["all_rows"] / extra["seconds"]
            out["ok"] = out["rows_per_s"] >= GOALS[store]
    return out


def _writes(
    store_name: str, store: Any, prepared: list[tuple[str, Any]], pgid: int | None
) -> list[dict[str, Any]]:
    """Each trace written PASSES times as separate runs; the report read after the last."""
    from ctda.store.report import build as report_build

    out: list[dict[str, Any]] = []
    for p in range(1, PASSES + 1):
        for k, (label, data) in enumerate(prepared):
            name = f"ctda-bench-{os.getpid()}-{k}-{p}"
            run = dataclasses.replace(data, name=name, run=dict(data.run, name=name))
            _log(f"{store_name} <- {label} (pass {p})")
            row = measure(functools.partial(store.write_run, run), pgid)
            if p == PASSES:
                t0 = time.perf_counter()
                report_build(store, run.name)
                row["report_s"] = time.perf_counter() - t0
            out.append(_row(store_name, label, data, "write", {**row, "pass": p}))
    # deleting a run from a store that holds others (cost grows with the path's hub sizes)
    for k, (label, _data) in enumerate(prepared):
        t0 = time.perf_counter()
        store.delete_run(f"ctda-bench-{os.getpid()}-{k}-1")
        last = next(r for r in reversed(out) if r["trace"] == label)
        last["delete_s"] = time.perf_counter() - t0
    return out


def whatif_in_db(store: Any, prepared: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """One what-if per written trace, in Python and in the database: times and agreement.

    The scenario halves every third analysed event (and what is nested inside it); the
    run of the last write pass is re-timed by ``ctda.replay`` and by the Python engine.
    """
    import numpy as np

    from ctda.analysis import snapshot
    from ctda.whatif import indb
    from ctda.whatif.scenario import run as run_scenario
    from ctda.whatif.select import Override

    out: list[dict[str, Any]] = []
    for k, (label, data) in enumerate(prepared):
        info = store.find_run(f"ctda-bench-{os.getpid()}-{k}-{PASSES}")
        if info is None:
            continue
        a = snapshot.load(data.blobs["snapshot"])
        if len(a.contention):
            a.contention = type(a.contention).empty()  # the database does not model it
        ovs = [Override("every third event x0.5", np.arange(0, a.nodes.n, 3, dtype=np.int64), factor=0.5)]
        t0 = time.perf_counter()
        py = run_scenario(a, ovs)
        py_s = time.perf_counter() - t0
        _log(f"neo4j what-if in the database <- {label}")
        t0 = time.perf_counter()
        got = indb.replay(store, info.id, ovs, a)
        db_s = time.perf_counter() - t0
        same = got.steps.predicted_ns.tolist() == py.step_times().predicted_ns.tolist()
        row = _row("neo4j", label, data, "whatif", {"python_s": py_s, "in_db_s": db_s, "same_ns": same})
        out.append(row)
    return out


def _remove_bench_runs(store: Any) -> None:
    """Remove the bench's runs from a server that is not ours."""
    for r in store.runs(include_incomplete=True):
        if r.name.startswith(f"ctda-bench-{os.getpid()}-"):
            store.delete_run(r.name)


def run(quick: bool) -> list[dict[str, Any]]:
    """Measure both stores on the inputs: write rows, then floor rows."""
    from ctda.store import open_store
    from ctda.store.config import Target

    prepared = _prepare(quick)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ctda-bench-store-") as d:
        for k, one in enumerate(prepared):  # a store per trace: pass 1 meets an empty store
            with open_store(Target("ladybug", str(Path(d) / f"bench{k}.lbug"))) as s:
                rows += _writes("ladybug", s, [one], None)
        for k, (label, data) in enumerate(prepared):
            (Path(d) / f"floor{k}").mkdir()
            rows.append(_row("ladybug", label, data, "floor", floor_ladybug(data, Path(d) / f"floor{k}")))
            model = floor_ladybug(data, Path(d) / f"floor{k}", properties=True)
            rows.append(_row("ladybug", label, data, "floor", {**model, "properties": True}))
    with neo4j_target() as nt:
        if nt.target is None:
            rows += [_row("neo4j", label, data, "write", {"skipped": nt.note}) for label, data in prepared]
        else:
            with open_store(nt.target) as s:
                try:
                    rows += [{**r, "server": nt.note} for r in _writes("neo4j", s, prepared, nt.pgid)]
                    if nt.private:  # our server has ctda's procedures
                        rows += whatif_in_db(s, prepared)
                finally:
                    if not nt.private:
                        _remove_bench_runs(s)
            if nt.private:
                for label, data in prepared:
                    for props in (False, True):
                        _log(f"neo4j floor <- {label} (best of 2: the first meets new statement shapes)")
                        tries = [floor_neo4j(data, nt.target, nt.pgid, properties=props) for _ in range(2)]
                        best = min(tries, key=lambda t: t["seconds"])
                        rows.append(_row("neo4j", label, data, "floor", {**best, "properties": props}))
    for r in (r for r in rows if r["kind"] != "whatif"):
        what = f"{r['kind']}{' pass ' + str(r['pass']) if 'pass' in r else ''}"
        _log(
            f"{r['store']:8s} {what:12s} {r['trace']}: "
            + (
                f"{r['rows']:,} rows in {r['seconds']:.1f} s = {r['rows_per_s']:,.0f} rows/s"
                if "seconds" in r
                else r["skipped"]
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="the shipped trace only")
    args = ap.parse_args(argv)
    for r in run(args.quick):
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
