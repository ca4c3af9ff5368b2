"""Streamed vs in-memory analysis: wall time and peak memory of ``ctda analyze [--stream]``.

The input is the ``native`` suite's replica (the corpus's largest GPU training trace grown
to >= 1.2M events, plain JSON). Each figure is taken in a fresh process
(``python -m bench.suite_stream MODE PATH``, one JSON line) that first analyses a tiny
trace the same way, so the engine's imports and compiled code are loaded: the RSS then is
the *floor* any analysis pays, and the goal is on the peak above it. ``ctda --version``'s
peak is reported beside it (the command-line start-up alone).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import corpus
from bench.child import children_peak_mb, rss_mb
from bench.measure import run_timed, timed_runs
from bench.suite_native import FALLBACK, SOURCE, TARGET, TARGET_QUICK
from bench.suites import Context, SuiteResult, fmt_num, mark, markdown_table, register
from ctda.api import tune_memory

GOAL_ABOVE_FLOOR = 0.5  #: peak RSS above the floor, as a fraction of the JSON
MODES = ("in-memory", "stream", "stream-jobs2")
WARMUP = "bench/traces/gpu/b1_bf16_conv_before_r1.pt.trace.json.gz"  # 8.9k events, 12 steps


def _run(mode: str, path: Path) -> dict[str, Any]:
    from ctda import api

    if mode.startswith("stream"):
        got = api.analyze_stream(path, jobs=2 if mode == "stream-jobs2" else 1)
        return {"events": got.events, "groups": got.groups, "largest_group": got.largest_group}
    a = api.analyze(path)
    api.report(a)
    return {"events": len(a.table)}


def child(mode: str, path: Path) -> dict[str, Any]:
    """One measurement: warm up on a small trace, then analyse ``path`` in ``mode``."""
    repo = Path(__file__).resolve().parents[1]
    _run(mode, repo / WARMUP)
    floor = rss_mb("VmRSS")
    t0 = time.perf_counter()
    out = _run(mode, path)
    return {
        **out,
        "seconds": time.perf_counter() - t0,
        "floor_mb": floor,
        "peak_mb": rss_mb("VmHWM"),
        "children_peak_mb": children_peak_mb(),
    }


def _version_peak_mb(ctx: Context) -> float | None:
    """Peak RSS of ``ctda --version`` (MB), from the child's rusage."""
    code = (
        "import resource, subprocess, sys; "
        "subprocess.run([sys.executable, '-m', 'ctda.cli.app', '--version'], capture_output=True, "
        "check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6)"
    )
    done = subprocess.run([ctx.python(), "-c", code], env=ctx.child_env(), capture_output=True, text=True)
    return float(done.stdout.strip()) if done.returncode == 0 else None


@register("stream", title="Streamed analysis (ctda analyze --stream)", order=12)
def run(ctx: Context) -> SuiteResult:
    """One row per mode on the large replica."""
    source = ctx.corpus / SOURCE if ctx.corpus is not None else ctx.repo / FALLBACK
    if not source.is_file():
        return SuiteResult(rows=[], markdown=f"Source trace {source.name} not found: skipped.")
    target = TARGET_QUICK if ctx.quick else TARGET
    syn = corpus.synthetic(source, ctx.cache, log=ctx.log, plain=True, **target)
    json_mb = syn.path.stat().st_size / 1e6
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        ctx.log(f"  {mode}: {syn.path.name} ...")
        cmd = [ctx.python(), "-m", "bench.suite_stream", mode, str(syn.path)]
        # times from the runs left alone, the process tree's memory from one more, sampled
        runs = run_timed(cmd, ctx.child_env(), ctx.timeout_s, ctx.repeat)
        done = [r.report for r in runs if r.report is not None]
        if not done:
            rows.append({"mode": mode, "error": runs[0].error})
            continue
        timed = [r.report for r in timed_runs(runs, ctx.repeat) if r.report is not None]
        best = min(timed, key=lambda r: r["seconds"])
        above = max(r["peak_mb"] - r["floor_mb"] for r in done)  # memory: the worst run
        rows.append(
            {
                "mode": mode,
                "json_mb": json_mb,
                **best,
                "above_floor_mb": above,
                "above_floor_x_json": above / json_mb,
                "tree_peak_mb": max(r.tree_peak_mb for r in runs),
            }
        )
    version = _version_peak_mb(ctx)
    table = markdown_table(
        [
            "mode",
            "events",
            "JSON MB",
            "wall s",
            "floor MB",
            "peak MB",
            "above floor",
            "x JSON",
            "groups",
            "tree PSS MB",
        ],
        [
            [
                r["mode"],
                fmt_num(r.get("events")),
                fmt_num(r.get("json_mb"), 0),
                fmt_num(r.get("seconds"), 2),
                fmt_num(r.get("floor_mb"), 0),
                fmt_num(r.get("peak_mb"), 0),
                fmt_num(r.get("above_floor_mb"), 0),
                fmt_num(r.get("above_floor_x_json"), 2)
                + (mark(r["above_floor_x_json"] <= GOAL_ABOVE_FLOOR) if r["mode"] == "stream" else ""),
                fmt_num(r.get("groups")),
                fmt_num(r.get("tree_peak_mb"), 0),
            ]
            if "error" not in r
            else [r["mode"], r["error"], "", "", "", "", "", "", "", ""]
            for r in rows
        ],
        "lrrrrrrrrr",
    )
    parts = [
        f"Replica of `{source.name}` (`{syn.path.name}`), plain JSON. *floor*: the process's RSS after "
        "analysing a tiny trace the same way (imports and compiled code); goal: the streamed "
        f"analysis' peak above it <= {GOAL_ABOVE_FLOOR}x the JSON.",
        table,
        f"`ctda --version` peak RSS: {fmt_num(version, 0)} MB. *stream-jobs2*: `--jobs 2`, two groups at "
        "once in forked workers; its *peak* is the main process's, *tree PSS* (sampled) counts the "
        "workers too.",
    ]
    return SuiteResult(rows=rows, markdown="\n\n".join(parts), extra={"version_peak_mb": version})


def main(argv: list[str] | None = None) -> int:
    tune_memory()  # as the command line does
    parser = argparse.ArgumentParser(prog="python -m bench.suite_stream")
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    print(json.dumps(child(args.mode, args.path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
