"""Reader suite: speed and peak memory of ``read_trace`` on large real and synthetic traces.

Inputs: the largest traces of the shared corpus (by uncompressed size) and one synthetic
trace of >= 1M events and >= 1 GiB of JSON made by :mod:`bench.replicate` from a real GPU
trace, read both gzipped and plain. Each read runs in a fresh process (:mod:`bench.child`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import corpus
from bench.measure import run_timed, timed_runs
from bench.suites import Context, SuiteResult, family_sections, fmt_num, mark, markdown_table, register

GOAL_MB_S = 150.0
GOAL_RSS_RATIO = 2.0
N_CORPUS, N_CORPUS_QUICK = 5, 2
#: a modern CUDA training trace: backward thread, NCCL, flows of both kinds
SYNTH_SOURCE = "hta/ddp_nccl_allreduce_ws2_rank0.json.gz"
#: a real GPU trace shipped with the repo, used when the corpus is absent
SYNTH_FALLBACK = "tests/data/kineto/resnet50_nw0_2020_bare_list.json.gz"
SYNTH_TARGET = {"min_events": 1_000_000, "min_bytes": 2**30}
SYNTH_TARGET_QUICK = {"min_events": 200_000, "min_bytes": 0}


@dataclass
class Target:
    """One file to read and how to label it."""

    family: str
    label: str
    path: Path


def _targets(ctx: Context, notes: list[str]) -> list[Target]:
    out: list[Target] = []
    if ctx.corpus is None:
        notes.append("Shared corpus not found ($CTDA_TRACE_CORPUS or ../shared/traces): corpus rows skipped.")
    else:
        n = N_CORPUS_QUICK if ctx.quick else N_CORPUS
        for p in corpus.largest(corpus.corpus_traces(ctx.corpus), n):
            out.append(Target("corpus", str(p.relative_to(ctx.corpus)), p))
    source = ctx.corpus / SYNTH_SOURCE if ctx.corpus is not None else ctx.repo / SYNTH_FALLBACK
    if not source.is_file():
        notes.append(f"Synthetic source {source.name} not found: synthetic rows skipped.")
        return out
    target = SYNTH_TARGET_QUICK if ctx.quick else SYNTH_TARGET
    for plain in (False, True):
        syn = corpus.synthetic(source, ctx.cache, log=ctx.log, plain=plain, **target)
        stem = syn.source.removesuffix(".gz").removesuffix(".json")
        label = f"{stem} + {syn.copies} step copies"
        out.append(Target("synthetic", label, syn.path))
    return out


def _measure(ctx: Context, t: Target) -> dict[str, Any]:
    """Run the child and turn its report into a table row.

    Peak RSS is the larger of the reading process's exact ``VmHWM`` and the sampled PSS
    sum of its whole process tree (the reader may fork a decode worker).
    """
    row: dict[str, Any] = {
        "family": t.family,
        "trace": t.label,
        "format": "json.gz" if t.path.name.endswith(".gz") else "json",
        "file_mb": t.path.stat().st_size / 1e6,
    }
    cmd = [ctx.python(), "-m", "bench.child", "read", str(t.path)]
    runs = run_timed(cmd, ctx.child_env(), ctx.timeout_s, ctx.repeat)
    failed = [m for m in runs if m.report is None]
    if failed:
        return {**row, "error": failed[0].error}
    # time: the fastest run left alone (least disturbed); memory: the worst run, sampled
    m = min(timed_runs(runs, ctx.repeat), key=lambda r: r.report["seconds"] if r.report else float("inf"))
    sampled = runs[-1]
    rep = m.report
    assert rep is not None
    json_mb = rep["json_bytes"] / 1e6
    peak = max(max(r.report["peak_rss_mb"], r.tree_peak_mb) for r in runs if r.report)
    row.update(
        json_mb=json_mb,
        events=rep["events"],
        seconds=rep["seconds"],
        mb_per_s=json_mb / rep["seconds"],
        cpu_s=rep["cpu_s"],
        cpu_s_helpers=rep["cpu_s_helpers"],
        peak_rss_mb=peak,
        baseline_rss_mb=rep["baseline_rss_mb"],
        rss_over_json=peak / json_mb,
        delta_rss_over_json=(peak - rep["baseline_rss_mb"]) / json_mb,
        reader_proc_peak_mb=rep["peak_rss_mb"],
        worker_peak_mb=rep["children_peak_rss_mb"],
        tree_pss_peak_mb=sampled.tree_peak_mb,
        max_processes=sampled.max_procs,
        runs=len(runs) - 1,
        warnings=rep["warnings"],
    )
    row["speed_ok"] = row["mb_per_s"] >= GOAL_MB_S
    row["rss_ok"] = row["rss_over_json"] <= GOAL_RSS_RATIO
    return row


def _table(rows: list[dict[str, Any]]) -> str:
    header = [
        "trace",
        "format",
        "JSON MB",
        "events",
        "s",
        "MB/s",
        "CPU s (reader + worker)",
        "peak RSS MB",
        "RSS/JSON",
        "(RSS−base)/JSON",
        "reader / worker MB",
    ]
    body = []
    for r in rows:
        if "error" in r:
            body.append([f"`{r['trace']}`", r["format"], "", "", "", f"**{r['error']}**", "", "", "", "", ""])
            continue
        body.append(
            [
                f"`{r['trace']}`",
                r["format"],
                fmt_num(r["json_mb"]),
                fmt_num(r["events"]),
                fmt_num(r["seconds"], 2),
                fmt_num(r["mb_per_s"]) + mark(r["speed_ok"]),
                f"{fmt_num(r['cpu_s'], 2)} + {fmt_num(r['cpu_s_helpers'], 2)}",
                fmt_num(r["peak_rss_mb"], 0),
                fmt_num(r["rss_over_json"], 2) + mark(r["rss_ok"]),
                fmt_num(r["delta_rss_over_json"], 2),
                f"{fmt_num(r['reader_proc_peak_mb'], 0)} / {fmt_num(r['worker_peak_mb'], 0)}",
            ]
        )
    return markdown_table(header, body, align="llrrrrrrrrr")


def _section(rows: list[dict[str, Any]], notes: list[str], quick: bool) -> str:
    parts = [
        "`ctda.ingest.reader.read_trace` on one file, in a fresh process per file "
        "(`python -m bench.child read`).",
        f"Goals: **≥ {GOAL_MB_S:.0f} MB/s** of uncompressed JSON, "
        f"**peak RSS ≤ {GOAL_RSS_RATIO:.0f}× the JSON size** (✓/✗ beside each figure).",
        "MB = 10⁶ bytes of uncompressed JSON. *s* is wall time of the `read_trace` call, the fastest "
        "of the runs left alone (memory comes from one more run, sampled: sampling slows what it "
        "watches, `bench/measure.py` `run_timed`); *CPU s* "
        "is its user+system time in the reading process + in helper processes (on a busy machine "
        "the wall time also counts waiting for a core). *peak RSS* is the larger of the reading process's "
        "VmHWM and the sampled PSS sum of its process tree (the reader may fork a decode worker); "
        "*base* is the reading process's RSS after imports and warm-up, just before the read; "
        "*reader / worker* are the VmHWM of the reading process and the max RSS of its helper "
        "processes (shared pages counted in both).",
    ]
    return family_sections(parts, rows, _table, notes, quick)


@register("reader", title="Reader: speed and memory", order=10)
def run(ctx: Context) -> SuiteResult:
    """Measure read_trace on every target; one row per file."""
    notes: list[str] = []
    targets = _targets(ctx, notes)
    rows = []
    for t in targets:
        ctx.log(f"  read {t.label} [{t.path.name}] ...")
        row = _measure(ctx, t)
        rows.append(row)
        if "error" in row:
            ctx.log(f"    FAILED: {row['error']}")
        else:
            ctx.log(
                f"    {row['json_mb']:,.0f} MB, {row['events']:,} events: {row['seconds']:.2f} s, "
                f"{row['mb_per_s']:,.0f} MB/s, "
                f"peak RSS {row['peak_rss_mb']:,.0f} MB ({row['rss_over_json']:.2f}x JSON)"
            )
    syn = [r for r in rows if r["family"] == "synthetic" and "error" not in r]
    if syn:
        notes.append(
            f"Synthetic trace: {syn[0]['events']:,} events, {syn[0]['json_mb']:,.0f} MB JSON; "
            "the `.json` row is the byte-identical uncompressed twin of the `.json.gz` row."
        )
    extra = {"goals": {"mb_per_s": GOAL_MB_S, "rss_over_json": GOAL_RSS_RATIO}}
    return SuiteResult(rows=rows, markdown=_section(rows, notes, ctx.quick), notes=notes, extra=extra)
