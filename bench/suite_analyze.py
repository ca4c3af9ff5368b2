"""Analyze suite: ``ctda analyze`` time by stage and peak memory, per trace, in a fresh process.

Stages (wall seconds of the real :func:`ctda.analysis.engine.analyze` call, split by
timing the engine's own stage functions while it runs):

- *read*: :func:`ctda.ingest.reader.read_trace`;
- *graph*: node selection, windows, every rule, graph build (dedupe, CSR, topological
  order), event classes and the GIL-contention estimate: everything in ``analyze`` but
  the three below;
- *calibrate*: replay-calibrated weights;
- *CP*: the replay (forward pass, backtrack, slack), the per-window critical paths with
  their charges (``attribution.window_paths``) and the report tables
  (:func:`ctda.analysis.report.build`).

One child process per trace (``python -m bench.suite_analyze TRACE``): peak RSS is the
process's ``VmHWM`` right after the report (before any what-if) and the sampled PSS of its
process tree (the reader may fork a decode worker). The same child then times what-if
scenarios for the ``whatif`` suite (:mod:`bench.whatif_timing`), so one run of both suites
reads and analyses each trace once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from bench.measure import run_timed, timed_runs
from bench.suites import Context, SuiteResult, family_sections, fmt_num, markdown_table, register
from bench.synth import Target, targets
from ctda.api import tune_memory

__all__ = ["child_row", "measure_analysis", "timed_analyze"]

GOAL_RSS_GB_1E7 = 24.0  #: the machine's memory: 1e7 events must analyse without running out
WARMUP_TRACE = "tests/data/hta/rocm62_mi250_minitoy_train.json.gz"

#: engine stage functions timed while ``analyze`` runs: (module, attribute) -> stage name
_STAGES: tuple[tuple[str, str, str], ...] = (
    ("ctda.analysis.engine", "select", "select"),
    ("ctda.analysis.engine", "resolve", "windows"),
    ("ctda.analysis.engine", "edge_batches", "rules"),
    ("ctda.analysis.graph", "build", "build"),
    ("ctda.analysis.modes", "calibrate", "calibrate"),
    ("ctda.analysis.engine", "replay", "replay"),
    ("ctda.analysis.engine", "event_classes", "classes"),
    ("ctda.analysis.attribution", "window_paths", "window_paths"),
    ("ctda.analysis.engine", "estimate_contention", "contention"),
)


@contextmanager
def _stage_timers(acc: dict[str, float], cpu: dict[str, float]) -> Iterator[None]:
    """Wrap the engine's stage functions so each call adds its wall (``acc``) and CPU
    (``cpu``) seconds."""
    import importlib

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[name] = acc.get(name, 0.0) + time.perf_counter() - t0
                cpu[name] = cpu.get(name, 0.0) + time.process_time() - c0

        return wrapper

    with ExitStack() as stack:
        for module, attr, name in _STAGES:
            mod = importlib.import_module(module)
            if hasattr(mod, attr):
                stack.enter_context(mock.patch.object(mod, attr, timed(name, getattr(mod, attr))))
        yield


def timed_analyze(
    table: Any, options: Any = None, cpu: dict[str, float] | None = None
) -> tuple[Any, dict[str, float]]:
    """The real ``analyze(table, options)`` plus wall seconds per stage.

    Returns ``(analysis, stages)``: ``stages`` has the engine's stage functions
    (``select``, ``rules``, ``build``, ``calibrate``, ``replay``, ``window_paths``, ...),
    ``total``, and the bench's grouping ``graph`` (everything but calibrate, replay and
    window_paths), so the groups add up to ``total`` exactly. ``cpu``, when given, receives
    the same keys in CPU seconds of this process.
    """
    from ctda.analysis.engine import analyze

    acc: dict[str, float] = {}
    cpu = {} if cpu is None else cpu
    with _stage_timers(acc, cpu):
        t0, c0 = time.perf_counter(), time.process_time()
        a = analyze(table, options)
        acc["total"] = time.perf_counter() - t0
        cpu["total"] = time.process_time() - c0
    for d in (acc, cpu):
        d["graph"] = d["total"] - sum(d.get(k, 0.0) for k in ("calibrate", "replay", "window_paths"))
    return a, acc


def measure_analysis(path: Path) -> tuple[Any, dict[str, Any]]:
    """Read, analyse and report one trace in this process; figures as a flat dict.

    Seconds: ``read_s``, ``graph_s``, ``calibrate_s``, ``cp_s`` (replay + window paths +
    report), ``analyze_s`` (graph + calibrate + CP: everything after the read) and
    ``total_s``; ``stages`` has the finer split. Also the sizes (events, analysed
    events, edges, windows) and the critical path found (``cp_ns``, ``span_ns``).
    """
    from ctda.analysis import report
    from ctda.ingest.reader import read_trace

    t0, c0 = time.perf_counter(), time.process_time()
    table = read_trace(path)
    read_s, read_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    cpu: dict[str, float] = {}
    a, st = timed_analyze(table, cpu=cpu)
    t0, c0 = time.perf_counter(), time.process_time()
    rep = report.build(a)
    st["report"], cpu["report"] = time.perf_counter() - t0, time.process_time() - c0
    from ctda.analysis.breakdowns import KINDS, Breakdowns

    t0 = time.perf_counter()
    every = Breakdowns(a)
    for kind in KINDS:
        every.table(kind)
    breakdowns_s = time.perf_counter() - t0
    cp_s = st.get("replay", 0.0) + st.get("window_paths", 0.0) + st["report"]
    analyze_s = st["graph"] + st.get("calibrate", 0.0) + cp_s
    out = {
        "events": len(table),
        "json_bytes": int(table.meta.n_bytes),
        "analysed_events": int(a.nodes.n),
        "edges": int(a.graph.n_edges),
        "windows": len(a.windows),
        "cp_ns": int(rep.total_ns),
        "read_s": read_s,
        "graph_s": st["graph"],
        "calibrate_s": st.get("calibrate", 0.0),
        "cp_s": cp_s,
        "analyze_s": analyze_s,
        "total_s": read_s + analyze_s,
        "breakdowns_s": breakdowns_s,  #: every `ctda breakdown` table (goal <= 2 s at 1M events)
        "read_cpu_s": read_cpu_s,  #: this process only (a forked decode worker is not counted)
        "analyze_cpu_s": cpu["total"] + cpu["report"],
        "stages": {k: round(v, 6) for k, v in st.items()},
        "stages_cpu": {k: round(v, 6) for k, v in cpu.items()},
        "replay_within_1us": rep.checks["replay_within_1us"],
    }
    return a, out


def _warm_up(repo: Path) -> None:
    """Imports and compiled-code loading before anything is timed."""
    from ctda.analysis import report
    from ctda.analysis.engine import analyze
    from ctda.ingest.reader import read_trace
    from ctda.whatif import scenario, select

    a = analyze(read_trace(repo / WARMUP_TRACE))
    report.build(a)
    scenario.run(a, [select.parse_scale(a, "class=cpu=0.5")])


def child_main(argv: list[str] | None = None) -> int:
    """``python -m bench.suite_analyze TRACE [--whatif]``: one JSON line on stdout."""
    tune_memory()  # as the command line does
    from bench.child import children_peak_mb, cpu_seconds, rss_mb

    ap = argparse.ArgumentParser(prog="python -m bench.suite_analyze")
    ap.add_argument("trace", type=Path)
    ap.add_argument("--whatif", action="store_true", help="also time what-if scenarios")
    args = ap.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    _warm_up(repo)
    baseline = rss_mb("VmRSS")
    cpu0 = cpu_seconds()
    a, out = measure_analysis(args.trace)
    cpu1 = cpu_seconds()
    out.update(
        cpu_s=cpu1[0] - cpu0[0],
        cpu_s_helpers=cpu1[1] - cpu0[1],
        peak_rss_mb=rss_mb("VmHWM"),  # read + analyze + report, before any what-if
        worker_peak_rss_mb=children_peak_mb(),  # the reader's decode worker, if it forked one
        baseline_rss_mb=baseline,
    )
    if args.whatif:
        from bench.whatif_timing import LOADED_MAX_EVENTS, measure_whatif

        out["whatif"] = measure_whatif(a, loaded=out["events"] <= LOADED_MAX_EVENTS)
        out["whatif_peak_rss_mb"] = rss_mb("VmHWM")
    print(json.dumps(out, default=str), flush=True)
    return 0


# --- parent side -------------------------------------------------------------------------
#: child reports of this ``bench.run`` process, by (trace, with what-if), so the analyze
#: and whatif suites share one child run per trace
_MEMO: dict[tuple[str, bool], dict[str, Any]] = {}


def child_row(ctx: Context, t: Target, *, whatif: bool, reuse: bool = True) -> dict[str, Any]:
    """Run the child on ``t`` (``ctx.repeat`` times: fastest time, largest memory) -> row.

    With ``reuse``, a report from an earlier suite of this run (same trace, what-if at least
    as requested) is returned instead of measuring again.
    """
    if reuse:
        for key in ((t.key, whatif), (t.key, True)):
            if key in _MEMO:
                return _MEMO[key]
    row: dict[str, Any] = {
        "family": t.family,
        "trace": t.label,
        "file": t.path.name,
        "pattern": t.pattern,
        "size_class": t.size_class,
    }
    cmd = [ctx.python(), "-m", "bench.suite_analyze", str(t.path)] + (["--whatif"] if whatif else [])
    # times from the runs left alone, the process tree's memory from one more, sampled
    runs = run_timed(cmd, ctx.child_env(), ctx.timeout_s, ctx.repeat)
    timed = timed_runs(runs, ctx.repeat)
    failed = [m for m in runs if m.report is None]
    if failed:
        row["error"] = failed[0].error
        if failed[0].timed_out:
            row["timed_out"] = True
        _MEMO[(t.key, whatif)] = row
        return row
    best = min(timed, key=lambda m: m.report["total_s"] if m.report else float("inf"))
    assert best.report is not None
    row.update(best.report)
    # the analysis's peak: the measuring process's VmHWM right after the report, or the
    # reader's decode worker if that was larger (the sampled PSS of the whole process
    # tree also covers the what-if phase, so it is kept apart)
    row["peak_rss_mb"] = max(
        max(m.report["peak_rss_mb"], m.report.get("worker_peak_rss_mb", 0.0)) for m in runs if m.report
    )
    row["tree_pss_peak_mb"] = max(m.tree_peak_mb for m in runs)
    row["runs"] = len(timed)
    row["read_mb_s"] = row["json_bytes"] / 1e6 / row["read_s"] if row["read_s"] > 0 else None
    _MEMO[(t.key, whatif)] = row
    return row


def _table(rows: list[dict[str, Any]]) -> str:
    header = [
        "trace",
        "events",
        "edges",
        "windows",
        "read s",
        "read MB/s",
        "graph s",
        "calibrate s",
        "CP s",
        "analyze s",
        "analyze CPU s",
        "total s",
        "breakdowns s",
        "peak RSS MB",
    ]
    body = []
    for r in rows:
        if "error" in r:
            body.append([f"`{r['trace']}`", *[""] * 12, f"**{r['error']}**"])
            continue
        body.append(
            [
                f"`{r['trace']}`",
                fmt_num(r["events"]),
                fmt_num(r["edges"]),
                fmt_num(r["windows"]),
                fmt_num(r["read_s"], 2),
                fmt_num(r["read_mb_s"], 0),
                fmt_num(r["graph_s"], 2),
                fmt_num(r["calibrate_s"], 2),
                fmt_num(r["cp_s"], 2),
                fmt_num(r["analyze_s"], 2),
                fmt_num(r.get("analyze_cpu_s"), 2),
                fmt_num(r["total_s"], 2),
                fmt_num(r.get("breakdowns_s"), 2),
                fmt_num(r["peak_rss_mb"], 0),
            ]
        )
    return markdown_table(header, body, align="lrrrrrrrrrrrrr")


def _section(rows: list[dict[str, Any]], notes: list[str], quick: bool) -> str:
    parts = [
        "`read_trace` + `analyze` + `report.build` on one trace, in a fresh process per trace "
        "(`python -m bench.suite_analyze TRACE`); wall seconds.",
        "*graph* = node selection + rules + graph build (+ event classes, GIL-contention estimate); "
        "*calibrate* = replay-calibrated weights; *CP* = replay (forward, backtrack, slack) + "
        "per-window critical paths and charges + report tables; *analyze* = graph + calibrate + CP "
        "(everything after the read); *analyze CPU s*: the same in CPU seconds of the process (on a "
        "shared machine wall time also counts waiting for a core); *total* = read + analyze. "
        "*breakdowns* = every `ctda breakdown` table after the analysis (goal <= 2 s at 1M events). "
        "*read MB/s* is uncompressed JSON. *peak RSS* is the measuring process's VmHWM right after "
        "the report (or the reader's forked decode worker's peak, if larger).",
        f"Goal: 1e7 events analysed without running out of memory ({GOAL_RSS_GB_1E7:.0f} GB).",
    ]
    return family_sections(parts, rows, _table, notes, quick)


def _log_row(ctx: Context, row: dict[str, Any]) -> None:
    if "error" in row:
        ctx.log(f"    FAILED: {row['error']}")
        return
    ctx.log(
        f"    {row['events']:,} events: read {row['read_s']:.2f} s, graph {row['graph_s']:.2f} s, "
        f"calibrate {row['calibrate_s']:.2f} s, CP {row['cp_s']:.2f} s, "
        f"peak RSS {row['peak_rss_mb']:,.0f} MB"
    )


@register("analyze", title="Analyze: time by stage and memory", order=20)
def run(ctx: Context) -> SuiteResult:
    """Measure ctda on every target (with what-if timings for the whatif suite)."""
    notes: list[str] = []
    rows = []
    for t in targets(ctx, notes):
        ctx.log(f"  analyze {t.label} [{t.path.name}] ...")
        row = child_row(ctx, t, whatif=True)
        _log_row(ctx, row)
        rows.append(row)
    big = [r for r in rows if (r.get("size_class") or 0) >= 10_000_000]
    goals: dict[str, Any] = {}
    if big:
        ok = all("error" not in r and r["peak_rss_mb"] < GOAL_RSS_GB_1E7 * 1000 for r in big)
        goals["1e7_events_fit_in_memory"] = ok
        worst = max((r.get("peak_rss_mb", 0.0) for r in big), default=0.0)
        notes.append(
            f"Goal 1e7 events without running out of memory: **{'met' if ok else 'NOT met'}** "
            f"(peak RSS {worst / 1000:,.1f} GB of {GOAL_RSS_GB_1E7:.0f} GB)."
        )
    else:
        notes.append("No 1e7-event trace in this run (quick run): the memory goal was not checked.")
    extra = {"goals": goals}
    return SuiteResult(rows=rows, markdown=_section(rows, notes, ctx.quick), notes=notes, extra=extra)


if __name__ == "__main__":
    sys.exit(child_main())
