"""Job suite: a synthetic 8-rank job analysed end to end (``ctda analyze DIR``).

The job is made from a real one (the 4-rank DDP job with a 30 ms compute straggler on
rank 2): its ranks 0-3 become ranks 0-3 on host ``node0`` and, copied, ranks 4-7 on host
``node1`` (same timeline: the clock stage must find no correction), each grown to the
target size by the step replicator with one common copy count and time shift, so the
ranks' collectives still meet. Measured: wall time of the whole job with local processes
and with a Dask cluster started on this machine (``dask-local``: its start-up included),
and the cross-rank stage alone (matching, clocks, the step paths over the ranks'
skeletons, stragglers) with its peak Python-heap memory (tracemalloc: numpy and pandas
buffers included) and the size of what the workers send back.
"""

from __future__ import annotations

import gzip
import json
import pickle
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.replicate import load, plan, replicate
from bench.suites import Context, SuiteResult, fmt_num, markdown_table, register

SOURCE = "generated/multirank/g_ddp_ws4_compute30_r2"
RANKS_PER_HOST = 4
HOSTS = 2
EVENTS = 1_000_000
EVENTS_QUICK = 40_000


def make_job(ctx: Context, n_events: int) -> Path:
    """The 8 rank traces of about ``n_events`` each (cached)."""
    assert ctx.corpus is not None
    out = ctx.cache / f"job8_{n_events}"
    done = out / "done"
    if done.is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    src = ctx.corpus / SOURCE
    sources: list[Path] = []
    for host in range(HOSTS):
        for r in range(RANKS_PER_HOST):
            doc = json.loads(gzip.decompress((src / f"rank{r}.pt.trace.json.gz").read_bytes()))
            rank = host * RANKS_PER_HOST + r
            doc["distributedInfo"] = {
                **doc["distributedInfo"],
                "rank": rank,
                "world_size": HOSTS * RANKS_PER_HOST,
            }
            doc["host_name"] = f"node{host}"
            path = out / f"src_rank{rank}.json"
            path.write_text(json.dumps(doc))
            sources.append(path)
    # one shift and one copy count for every rank, so copy k of a collective meets copy k
    plans = [plan(load(p)[1]) for p in sources]
    shift = max(p.shift_us for p in plans) + 1000
    window = min(len(p.members) for p in plans)
    copies = max(0, -(-(n_events - window) // window))
    for rank, path in enumerate(sources):
        ctx.log(f"job: rank {rank}, {copies} copies")
        replicate(path, out / f"rank{rank}.json.gz", copies=copies, shift_us=shift)
        path.unlink()
    done.write_text("ok")
    return out


def _measure(ctx: Context, job_dir: Path, executor: str) -> dict[str, Any]:
    from ctda.analysis.engine import AnalysisOptions
    from ctda.job.executor import map_ranks
    from ctda.job.load import identify, job_files
    from ctda.job.run import assemble_job, skeleton_rank

    files = [str(f) for f in job_files([job_dir])]
    t0 = time.perf_counter()
    parts = map_ranks(skeleton_rank, files, AnalysisOptions(), executor)
    t_ranks = time.perf_counter() - t0
    sent = sum(len(pickle.dumps(p)) for p in parts)
    tracemalloc.start()
    t1 = time.perf_counter()
    layout = identify([p.rank_id for p in parts])
    job = assemble_job("job8", layout, {p.rank_id.rank: p for p in parts})
    t_cross = time.perf_counter() - t1
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cp = job.paths.groupby("label").ns.sum()
    return {
        "executor": executor,
        "ranks": len(parts),
        "events_per_rank": int(sum(p.skeleton.n_events for p in parts) / len(parts)),
        "wall_s": t_ranks + t_cross,
        "per_rank_stage_s": t_ranks,
        "cross_rank_s": t_cross,
        "cross_rank_peak_mb": peak / 1e6,
        "sent_mb": sent / 1e6,
        "collectives": job.matching.n_collectives,
        "unmatched": sum(job.matching.unmatched.values()),
        "steps": len(job.steps),
        "cp_equals_step": bool(
            (cp.reindex(job.steps.label).to_numpy() == job.steps.job_step_ns.to_numpy()).all()
        ),
        "offsets": sorted(set(job.offsets.how.values())),
        "stragglers": job.stragglers.straggler.value_counts().to_dict(),
    }


@register("job", title="Distributed jobs (8 ranks)", order=60)
def run(ctx: Context) -> SuiteResult:
    if ctx.corpus is None:
        return SuiteResult([], "Skipped: the trace corpus is not available.")
    n = EVENTS_QUICK if ctx.quick else EVENTS
    job_dir = make_job(ctx, n)
    rows = []
    for executor in ("local", "dask-local"):
        ctx.log(f"job: {executor}")
        rows.append(_measure(ctx, job_dir, executor))
    table = markdown_table(
        [
            "executor",
            "ranks x events",
            "wall s",
            "per-rank stage s",
            "cross-rank s",
            "cross-rank peak MB",
            "skeletons MB",
            "collectives (unmatched)",
            "CP == step",
        ],
        [
            [
                r["executor"],
                f"{r['ranks']} x {r['events_per_rank']:,}",
                fmt_num(r["wall_s"]),
                fmt_num(r["per_rank_stage_s"]),
                fmt_num(r["cross_rank_s"], 2),
                fmt_num(r["cross_rank_peak_mb"]),
                fmt_num(r["sent_mb"]),
                f"{r['collectives']} ({r['unmatched']})",
                str(r["cp_equals_step"]),
            ]
            for r in rows
        ],
    )
    body = (
        "A synthetic 8-rank job (two hosts of four ranks, grown from the real 4-rank DDP job with a"
        " compute straggler), analysed by `ctda analyze DIR`: each worker reads, analyses and"
        " returns its rank's skeleton; the cross-rank stage holds only those.\n\n" + table
    )
    return SuiteResult(rows, body)
