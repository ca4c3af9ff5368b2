"""Store write speed: rows/s (analysed events + dependency edges) into each store.

``run(quick) -> list[dict]`` is the hook :mod:`bench.run` calls; ``python -m
bench.store_bench [--quick]`` prints the rows as JSON lines. One row per (trace, store):
the time of :meth:`ctda.store.base.Store.write_run` alone (the trace is read and
analysed first, untimed), so rows/s measures the store, not the analysis. A run also
writes each window's critical path (``CP`` relationships, reported as ``cp_rels``) and
the analysis snapshot; they are part of the timed write but not of ``rows``.

Inputs: quick, the largest shipped trace; full, the largest trace of the shared corpus and
a synthetic trace of >= 1M events made by :mod:`bench.replicate` (cached in bench/.cache).
Neo4j: ``$CTDA_BENCH_NEO4J_URI`` (credentials from ``CTDA_NEO4J_USER`` /
``CTDA_NEO4J_PASSWORD`` or ``NEO4J_AUTH``), else a private server started with
``scripts/neo4j_server.py`` (needs Java 17+), else the Neo4j rows say why they are missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOALS = {"ladybug": 1_000_000, "neo4j": 100_000}  # rows/s
SHIPPED = REPO / "tests" / "data" / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"
SYNTH_SOURCE = "hta/ddp_nccl_allreduce_ws2_rank0.json.gz"
SYNTH_EVENTS = 1_000_000
#: the private benchmark server gets more memory than the test servers
NEO4J_CONF = {
    "server.memory.heap.initial_size": "2g",
    "server.memory.heap.max_size": "2g",
    "server.memory.pagecache.size": "2g",
}


def _log(msg: str) -> None:
    print(f"store_bench: {msg}", file=sys.stderr, flush=True)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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
def neo4j_target() -> Iterator[tuple[Any, int | None, str]]:
    """(Target or None, server pgid or None, note) for the Neo4j measurements."""
    from ctda.store.config import Target, resolve

    uri = os.environ.get("CTDA_BENCH_NEO4J_URI")
    if uri:
        yield resolve(uri), None, f"server {resolve(uri).location}"
        return
    server = _server_module()
    major = server.java_major_version("java")
    if major is None or major < server.MIN_JAVA:
        yield None, None, "no Java 17+: Neo4j not measured"
        return
    with tempfile.TemporaryDirectory(prefix="ctda-bench-neo4j-") as d:
        try:
            info = server.start(data_dir=Path(d), extra_conf=NEO4J_CONF)
        except server.Neo4jServerError as exc:
            yield None, None, f"Neo4j not measured: {str(exc).splitlines()[0]}"
            return
        try:
            note = "private Neo4j 5.26 server on this machine (heap 2g, page cache 2g)"
            yield Target("neo4j", info.uri, (info.user, info.password)), info.pid, note
        finally:
            server.stop(info)


def _wipe(target: Any) -> None:
    import neo4j

    with neo4j.GraphDatabase.driver(target.location, auth=target.auth) as driver, driver.session() as s:
        s.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS").consume()


def measure(store: Any, data: Any, pgid: int | None = None) -> dict[str, Any]:
    """Time one write_run; CPU of this process and (if known) of the server."""
    server0 = _proc_cpu(pgid) if pgid else None
    c0, t0 = _cpu(), time.perf_counter()
    store.write_run(data)
    seconds = time.perf_counter() - t0
    row: dict[str, Any] = {"seconds": seconds, "client_cpu_s": _cpu() - c0}
    if server0 is not None and pgid:
        server1 = _proc_cpu(pgid)
        row["server_cpu_s"] = None if server1 is None else server1 - server0
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Measure both stores on the inputs; one row per (trace, store)."""
    from ctda.analysis import snapshot
    from ctda.analysis.engine import analyze
    from ctda.ingest.reader import read_trace
    from ctda.store import open_store
    from ctda.store.config import Target
    from ctda.store.model import build

    prepared = []
    for label, path in inputs(quick):
        _log(f"reading and analysing {path.name}")
        a = analyze(read_trace(path))
        data = build(a, "bench", str(path), "0" * 64)
        data.blobs["snapshot"] = snapshot.dump(a)
        prepared.append((label, data))
        del a
    rows: list[dict[str, Any]] = []

    def row(store: str, label: str, data: Any, extra: dict[str, Any]) -> dict[str, Any]:
        n = data.n_rows
        out = {
            "suite": "store",
            "store": store,
            "trace": label,
            "events": data.events.num_rows,
            "edges": data.deps.num_rows,
            "cp_rels": data.cp.num_rows,
            "rows": n,
            "goal_rows_per_s": GOALS[store],
            "load_avg": os.getloadavg()[0],
            **extra,
        }
        if "seconds" in extra:
            out["rows_per_s"] = n / extra["seconds"]
            out["ok"] = out["rows_per_s"] >= GOALS[store]
        return out

    with tempfile.TemporaryDirectory(prefix="ctda-bench-store-") as d:
        for k, (label, data) in enumerate(prepared):
            _log(f"ladybug <- {label}")
            with open_store(Target("ladybug", str(Path(d) / f"s{k}.lbug"))) as s:
                rows.append(row("ladybug", label, data, measure(s, data)))
    with neo4j_target() as (target, pgid, note):
        for label, data in prepared:
            if target is None:
                rows.append(row("neo4j", label, data, {"skipped": note}))
                continue
            _log(f"neo4j <- {label}")
            _wipe(target)
            with open_store(target) as s:
                rows.append(row("neo4j", label, data, {**measure(s, data, pgid), "server": note}))
    for r in rows:
        _log(
            f"{r['store']:8s} {r['trace']}: "
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
