"""Native vs Python reader: read speed and ``ctda analyze`` time on one large GPU trace.

The input is a replica of the corpus's largest GPU training trace grown to >= 1.2M events
(:mod:`bench.replicate`), as plain JSON so the figure is the reader's, not gunzip's. Each
figure is taken in a fresh process, once with the native extension and once with
``CTDA_READER=python``; both readers must give the same number of events.

Whole copies make that replica 1.78M events (381 MB); the trace the goals were set on had
1.2M events in 316 MB of JSON. So the native reader is also measured on the replica one copy
smaller (1.19M events, 254 MB: that trace's event count, 20 % less JSON): the trace of the
goals lies between the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import corpus
from bench.measure import run_timed, timed_runs
from bench.suites import Context, SuiteResult, fmt_num, markdown_table, register

SOURCE = "generated/gpu/t1_gpt_large.pt.trace.json.gz"
FALLBACK = "tests/data/kineto/resnet50_nw0_2020_bare_list.json.gz"  # without the corpus
TARGET = {"min_events": 1_200_000, "min_bytes": 0}
TARGET_QUICK = {"min_events": 200_000, "min_bytes": 0}
#: one copy fewer: the event count of the trace the goals were set on (native reader only)
SMALLER = {"min_events": 1_000_000, "min_bytes": 0}
READERS = ("native", "python")
#: the native reader on this >= 1.2M-event trace (MB/s of JSON), and ctda analyze end to end (s)
GOAL_MB_S, GOAL_ANALYZE_S = 300.0, 2.5


def _env(ctx: Context, reader: str) -> dict[str, str]:
    env = ctx.child_env()
    env["CTDA_READER"] = reader
    return env


def _read(ctx: Context, path: Path, reader: str) -> dict[str, Any]:
    cmd = [ctx.python(), "-m", "bench.child", "read", str(path)]
    runs = timed_runs(run_timed(cmd, _env(ctx, reader), ctx.timeout_s, ctx.repeat), ctx.repeat)
    done = [r.report for r in runs if r.report is not None]
    if not done:
        return {"error": runs[0].error}
    best = min(done, key=lambda r: r["seconds"])
    mb = best["json_bytes"] / 1e6
    return {
        "events": best["events"],
        "json_mb": mb,
        "read_s": best["seconds"],
        "read_mb_s": mb / best["seconds"],
        "read_cpu_s": best["cpu_s"] + best["cpu_s_helpers"],
    }


def _analyze(ctx: Context, path: Path, reader: str) -> float | None:
    """Wall seconds of ``ctda analyze`` (start-up, read, analysis, report), fastest run."""
    import subprocess

    cmd = [ctx.python(), "-m", "ctda.cli.app", "analyze", str(path)]
    best = None
    for _ in range(ctx.repeat):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, env=_env(ctx, reader), capture_output=True, timeout=ctx.timeout_s)
        if done.returncode != 0:
            return None
        best = min(best or float("inf"), time.perf_counter() - t0)
    return best


def _goal(row: dict[str, Any], key: str, met: Callable[[float], bool]) -> str:
    """`` ✓``/`` ✗`` after the native reader's figure (the Python reader has no goal)."""
    if row.get("reader") != "native" or row.get(key) is None:
        return ""
    return " ✓" if met(row[key]) else " ✗"


@register("native", title="Reader: native vs Python", order=11)
def run(ctx: Context) -> SuiteResult:
    """One row per reader on the >= 1.2M-event replica, and the native reader's on the one a
    copy smaller (its goal marks too: it has the goals' event count, less JSON)."""
    notes: list[str] = []
    source = ctx.corpus / SOURCE if ctx.corpus is not None else ctx.repo / FALLBACK
    if not source.is_file():
        return SuiteResult(rows=[], markdown=f"Source trace {source.name} not found: skipped.", notes=notes)
    target = TARGET_QUICK if ctx.quick else TARGET
    syn = corpus.synthetic(source, ctx.cache, log=ctx.log, plain=True, **target)
    label = f">= {target['min_events']:,} events"
    runs = [(syn.path, reader, label) for reader in READERS]
    if not ctx.quick:
        smaller = corpus.synthetic(source, ctx.cache, log=ctx.log, plain=True, **SMALLER)
        runs.append((smaller.path, "native", "one copy fewer"))
    rows = []
    for path, reader, label in runs:
        ctx.log(f"  {reader} reader: read and analyze {path.name} ...")
        row: dict[str, Any] = {"input": label, "reader": reader, **_read(ctx, path, reader)}
        if "error" not in row:
            row["analyze_s"] = _analyze(ctx, path, reader)
        rows.append(row)
        ctx.log(f"    {row}")
    ok = [r for r in rows[:2] if "error" not in r]
    if len(ok) == 2:
        if ok[0]["events"] != ok[1]["events"]:
            notes.append("**The readers disagree on the number of events.**")
        notes.append(f"Native read speed-up: {ok[1]['read_s'] / ok[0]['read_s']:.1f}x.")
    body = [
        [
            r["input"],
            r["reader"],
            fmt_num(r.get("events")),
            fmt_num(r.get("json_mb")),
            fmt_num(r.get("read_s"), 2),
            fmt_num(r.get("read_mb_s")) + _goal(r, "read_mb_s", lambda v: v >= GOAL_MB_S),
            fmt_num(r.get("read_cpu_s"), 2),
            fmt_num(r.get("analyze_s"), 1) + _goal(r, "analyze_s", lambda v: v <= GOAL_ANALYZE_S)
            if r.get("analyze_s")
            else r.get("error", "failed"),
        ]
        for r in rows
    ]
    table = markdown_table(
        ["input", "reader", "events", "JSON MB", "read s", "MB/s", "read CPU s", "`ctda analyze` s"],
        body,
        "llrrrrrr",
    )
    intro = (
        f"`read_trace` (fresh process, `python -m bench.child read`) and `ctda analyze` on "
        f"`{syn.source}` replicated to {syn.n_events:,} events (plain JSON), with the native "
        "extension and with `CTDA_READER=python`, and natively on the replica one copy smaller (the "
        "goals' trace had 1.2M events in 316 MB of JSON: it lies between the two); the fastest of the runs. "
        "Goals for the native "
        f"reader: **>= {GOAL_MB_S:.0f} MB/s** of JSON, `ctda analyze` **<= {GOAL_ANALYZE_S} s** "
        "(✓/✗ beside each figure)."
    )
    md = "\n\n".join([intro, table, *notes])
    return SuiteResult(rows=rows, markdown=md, notes=notes)
