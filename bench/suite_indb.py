"""In-database what-if suite: ``ctda.replay`` on a stored run, cold and warm.

A user editing factors in Cypher calls ``ctda.replay`` again and again on one run. The
first call after the server started (or after the run was written) reads the run's events
and edges from the store (*cold*); later calls replay the graph the procedure keeps
(*warm*, :file:`neo4j/procedures/.../RunCache.java`). Timed per call, as the user waits:

- *full*: :func:`ctda.whatif.indb.replay` (``ctda.replayArrays``: every window's path as two
  packed arrays over Bolt, named and classed from the analysis in memory), what
  ``ctda whatif --in-db`` pays for the re-timing;
- *lists*: ``ctda.replay`` yielding every path as the six lists Cypher users read (what
  ``ctda whatif --in-db`` fetched and decoded before the packed arrays), records decoded;
- *steps*: ``CALL ctda.replay(...) YIELD window, predictedNs`` alone;
- *end to end*: ``ctda whatif RUN --scale ... --in-db --dry-run --format json`` in a fresh
  process, as a user types it (start-up, the run's analysis read from the store, selection,
  the procedure, the rendered answer).

Warm calls alternate two scenarios (so nothing but the graph is reused) and must give the
Python engine's step times to the nanosecond. Input: the synthetic >= 1M-event trace of
the store suite (``$CTDA_BENCH_INDB_EVENTS`` sets another size; ``--quick``: the largest
shipped trace), ingested into a private Neo4j server with ctda's plugins
(:func:`bench.store_bench.neo4j_target`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register

GOAL_WARM_S = 2.0
WARM_CALLS = 4
STEPS_QUERY = (
    "MATCH (r:Run {id: $r}) CALL ctda.replay(r.id, $f) YIELD window, predictedNs "
    "RETURN window, predictedNs ORDER BY window"
)
LISTS_QUERY = (
    "MATCH (r:Run {id: $r}) CALL ctda.replay(r.id, $f) "
    "YIELD window, predictedNs, edges, events, waits, charges, classes, names "
    "RETURN window, predictedNs, edges, events, waits, charges, classes, names"
)
#: a smaller synthetic trace than the store suite's (trace events), for a quicker run:
#: ingesting a million events into Neo4j takes tens of minutes on a busy machine
EVENTS_ENV = "CTDA_BENCH_INDB_EVENTS"
#: the end-to-end command's selection
CLI_SCALE = "cat=kernel=0.5"


def _scenarios(n: int) -> list[list[Any]]:
    """Two scenarios over every k-th analysed event: halve every third, double every fifth."""
    from ctda.whatif.select import Override

    return [
        [Override("every third event x0.5", np.arange(0, n, 3, dtype=np.int64), factor=0.5)],
        [Override("every fifth event x2", np.arange(1, n, 5, dtype=np.int64), factor=2.0)],
    ]


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(store: Any, run_id: int, a: Any, pgid: int | None = None) -> dict[str, Any]:
    """Cold then warm calls on run ``run_id`` (just written: the procedure has not read it).

    With the server's process group ``pgid``, also its CPU seconds per warm steps call (wall
    times on a busy machine include waiting for a core).
    """
    from bench.store_bench import _proc_cpu
    from ctda.whatif import indb
    from ctda.whatif.scenario import run as run_scenario

    durations = a.nodes.end - a.nodes.ts
    scenarios = _scenarios(a.nodes.n)
    python_s, want = [], []
    for ovs in scenarios:
        s, py = _timed(lambda ovs=ovs: run_scenario(a, ovs))
        python_s.append(s)
        want.append(py.step_times().predicted_ns.tolist())
    cold_s, got = _timed(lambda: indb.replay(store, run_id, scenarios[0], a))
    same = got.steps.predicted_ns.tolist() == want[0]
    warm_s, steps_s, steps_cpu = [], [], []
    for k in range(WARM_CALLS):
        ovs, expect = scenarios[k % 2], want[k % 2]
        s, got = _timed(lambda ovs=ovs: indb.replay(store, run_id, ovs, a))
        warm_s.append(s)
        same = same and got.steps.predicted_ns.tolist() == expect
        f = indb.factors(ovs, durations)
        cpu0 = _proc_cpu(pgid) if pgid else None
        s, rows = _timed(lambda f=f: store.query(STEPS_QUERY, {"r": run_id, "f": f}).records())
        steps_s.append(s)
        cpu1 = _proc_cpu(pgid) if pgid else None
        if cpu0 is not None and cpu1 is not None:
            steps_cpu.append(cpu1 - cpu0)
        same = same and [r["predictedNs"] for r in rows] == expect
    f = indb.factors(scenarios[0], durations)
    lists_s, _ = _timed(lambda: store.query(LISTS_QUERY, {"r": run_id, "f": f}).records())
    (stats,) = store.query("CALL ctda.replayCache()").records()
    return {
        "warm_lists_s": lists_s,
        "python_s": min(python_s),
        "cold_s": cold_s,
        "warm_s": float(np.median(warm_s)),
        "warm_steps_s": float(np.median(steps_s)),
        "warm_steps_server_cpu_s": float(np.median(steps_cpu)) if steps_cpu else None,
        "warm_calls": WARM_CALLS,
        "cache_loads": stats["loads"],
        "cache_hits": stats["hits"],
        "same_ns": same,
        "ok": same and float(np.median(steps_s)) <= GOAL_WARM_S,
    }


def end_to_end(ctx: Context, target: Any, a: Any) -> dict[str, Any]:
    """``ctda whatif indb-bench --in-db`` in a fresh process (the procedure warm): wall
    seconds, and whether its step times are the Python engine's."""
    import json
    import subprocess

    from ctda.whatif.scenario import run as run_scenario
    from ctda.whatif.select import parse_scale

    want = run_scenario(a, [parse_scale(a, CLI_SCALE)]).step_times().predicted_ns.tolist()
    env = {**ctx.child_env(), "CTDA_NEO4J_USER": target.auth[0], "CTDA_NEO4J_PASSWORD": target.auth[1]}
    argv = [ctx.python(), "-c", "from ctda.cli.app import main; main()", "whatif", "indb-bench", "--scale",
            CLI_SCALE, "--in-db", "--dry-run", "--format", "json", "--db", target.location]  # fmt: skip
    seconds, done = _timed(
        lambda: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=ctx.timeout_s)
    )
    if done.returncode != 0:
        return {"cli_s": None, "cli_error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    got = [s["predicted_ns"] for s in json.loads(done.stdout)["steps"]]
    return {"cli_s": seconds, "cli_same_ns": got == want}


def _input(ctx: Context) -> tuple[str, Any]:
    from bench import corpus, store_bench

    if ctx.quick or ctx.corpus is None:
        return f"shipped {store_bench.SHIPPED.name}", store_bench.SHIPPED
    events = int(os.environ.get(EVENTS_ENV) or store_bench.SYNTH_EVENTS)
    syn = corpus.synthetic(
        ctx.corpus / store_bench.SYNTH_SOURCE, ctx.cache, min_events=events, min_bytes=0, log=ctx.log
    )
    return f"synthetic {syn.source} x{syn.copies} ({syn.n_events:,} events)", syn.path


@register("indb", title="What-if inside Neo4j: ctda.replay cold and warm", order=36)
def run_indb(ctx: Context) -> SuiteResult:
    """One row: the trace, cold and warm call times, agreement with the Python engine."""
    from bench import store_bench
    from ctda.analysis.engine import AnalysisOptions
    from ctda.store import open_store
    from ctda.store.ingest import ingest

    label, trace = _input(ctx)
    row: dict[str, Any] = {"trace": label}
    with store_bench.neo4j_target() as nt:
        if nt.target is None or not nt.private:
            row["skipped"] = nt.note or "needs a private server with ctda's procedures"
        else:
            ctx.log(f"  ingesting {label} into {nt.note}")
            got = ingest(trace, nt.target, AnalysisOptions(), name="indb-bench", force=True)
            a = got.analysis
            assert a is not None
            if len(a.contention):  # the procedure does not model GIL contention
                a.contention = type(a.contention).empty()
            row.update(analysed_events=int(a.nodes.n), edges=int(got.run.edges))
            with open_store(nt.target, read_only=True) as s:
                info = s.find_run("indb-bench")
                assert info is not None
                ctx.log("  ctda.replay cold, then warm")
                row.update(measure(s, info.id, a, nt.pgid))
            row.update(end_to_end(ctx, nt.target, a))
            row["server"] = nt.note
    return SuiteResult(rows=[row], markdown=_markdown(row))


def _markdown(r: dict[str, Any]) -> str:
    intro = (
        "`ctda.replay` on a stored run: *cold* is the first call after the run was written (the "
        "procedure reads the run's events and edges from the store), *warm* the median of "
        f"{WARM_CALLS} later calls alternating two scenarios (the procedure keeps the run's graph); "
        "*full* is `ctda whatif --in-db`'s call (`ctda.replayArrays`: every window's path as packed "
        "edge ids and charges, named from the analysis in memory), *lists* one warm `ctda.replay` "
        "call yielding every path as the lists Cypher reads (what `--in-db` fetched before), *steps* "
        f"the Cypher call yielding step times only (the goal: <= {GOAL_WARM_S:g} s warm at 1M trace "
        "events); *server CPU*: the server's CPU seconds per warm steps call; *end to end*: "
        f"`ctda whatif indb-bench --scale {CLI_SCALE} --in-db --dry-run --format json` in a fresh "
        "process (procedure warm)."
    )
    if "skipped" in r:
        return f"{intro}\n\nskipped: {r['skipped']}"
    header = [
        "trace", "analysed events", "edges", "Python what-if s", "cold s", "warm s (full)",
        "warm s (lists)", "warm s (steps)", "server CPU s (steps)", "end to end s", "same ns",
    ]  # fmt: skip
    body = [[
        f"`{r['trace']}`", fmt_num(r["analysed_events"]), fmt_num(r["edges"]), fmt_num(r["python_s"], 3),
        fmt_num(r["cold_s"], 2), fmt_num(r["warm_s"], 2), fmt_num(r["warm_lists_s"], 2),
        fmt_num(r["warm_steps_s"], 2) + mark(r["ok"]), fmt_num(r.get("warm_steps_server_cpu_s"), 2),
        fmt_num(r.get("cli_s"), 2) if r.get("cli_s") is not None else f"failed: {r.get('cli_error')}",
        "yes" if r["same_ns"] and r.get("cli_same_ns") else "**NO**",
    ]]  # fmt: skip
    table = markdown_table(header, body, align="lrrrrrrrrrl")
    return f"{intro}\n\n{table}\n\n{r.get('server', '')}"
