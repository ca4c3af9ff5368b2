#!/usr/bin/env python3
"""Generate real multi-rank PyTorch profiler traces: a small DDP training job on CPU (gloo),
one Kineto trace per rank, with an optional straggler rank, plus measured step times.

usage: record.py --out DIR --job NAME --world N [--straggler R --kind sleep|compute
                               --extra-ms MS] [--steps 3] [--port 29511] [--host-name H]

Every rank: torch.set_num_threads(1); a small CNN wrapped in DistributedDataParallel (gloo
all-reduce of gradients, bucketed); synthetic batches made in a record_function("data_prep")
region; profiler schedule wait=1, warmup=1, active=STEPS with record_shapes and with_stack.
The straggler rank spends EXTRA_MS more per step inside data_prep: `sleep` (time.sleep, no
CPU) or `compute` (a pure-Python loop calibrated to EXTRA_MS on an idle core).
Writes DIR/NAME/rank{r}.pt.trace.json.gz and DIR/NAME/steps.json: per rank, per step wall
ms (perf_counter between prof.step() calls), and the job's step time (max over ranks).
Needs torch (any build with gloo), numpy.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import socket
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function, schedule

BATCH, IMG = 16, 32


def busy_loop(n: int) -> int:
    acc = 0
    for i in range(n):
        acc = (acc * 1103515245 + i) & 0x7FFFFFFF
    return acc


def calibrate_loop(ms: float) -> int:
    n = 200_000
    t0 = time.perf_counter()
    busy_loop(n)
    dt = time.perf_counter() - t0
    return max(1, int(n * (ms / 1000.0) / dt))


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def worker(rank: int, a: argparse.Namespace, out: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    model = DDP(make_model(), bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    slow = a.straggler == rank and a.extra_ms > 0
    loop_n = calibrate_loop(a.extra_ms) if slow and a.kind == "compute" else 0

    def step() -> None:
        with record_function("data_prep"):
            x = torch.randn(BATCH, 3, IMG, IMG, generator=g)
            y = torch.randint(0, 10, (BATCH,), generator=g)
            if slow and a.kind == "sleep":
                time.sleep(a.extra_ms / 1000.0)
            elif slow:
                busy_loop(loop_n)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):  # unprofiled warm-up steps
        step()
    dist.barrier()
    walls = []
    sched = schedule(wait=1, warmup=1, active=a.steps)
    with profile(
        activities=[ProfilerActivity.CPU], schedule=sched, record_shapes=True, with_stack=True
    ) as prof:
        for i in range(2 + a.steps):
            t0 = time.perf_counter()
            step()
            walls.append((i, (time.perf_counter() - t0) * 1000.0))
            prof.step()
    raw = out / f"rank{rank}.pt.trace.json"
    prof.export_chrome_trace(str(raw))
    text = raw.read_text()  # keep this machine's paths out of the trace
    text = re.sub(r'"traceName": "[^"]*"', f'"traceName": "{out.name}/{raw.name}"', text)
    if '"host_name"' not in text:  # some torch builds write none: the ranks share this host
        text = text.replace('"displayTimeUnit"', f'"host_name": "{a.host_name}",\n  "displayTimeUnit"', 1)
    with gzip.open(str(raw) + ".gz", "wt", compresslevel=9) as dst:
        dst.write(text)
    raw.unlink()
    (out / f"rank{rank}.walls.json").write_text(json.dumps(walls))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--straggler", type=int, default=-1)
    p.add_argument("--kind", choices=["sleep", "compute"], default="sleep")
    p.add_argument("--extra-ms", type=float, default=0.0)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--host-name", default=socket.gethostname(), help="written where torch writes none")
    a = p.parse_args()
    out = Path(a.out) / a.job
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(worker, args=(a, out), nprocs=a.world, join=True)
    ranks = {}
    for r in range(a.world):
        f = out / f"rank{r}.walls.json"
        ranks[r] = [
            {"profiler_step": f"ProfilerStep#{i}", "in_trace": i >= 2, "wall_ms": w}
            for i, w in json.loads(f.read_text())
        ]
        f.unlink()
    in_trace = [i for i, s in enumerate(ranks[0]) if s["in_trace"]]
    job = [max(ranks[r][i]["wall_ms"] for r in ranks) for i in in_trace]
    meta = {
        "job": a.job,
        "world_size": a.world,
        "straggler_rank": a.straggler,
        "straggler_kind": a.kind,
        "straggler_extra_ms": a.extra_ms,
        "torch": torch.__version__,
        "cpu_count": len(os.sched_getaffinity(0)),
        "host_cpu_count": os.cpu_count(),
        "threads_per_rank": 1,
        "backend": "gloo",
        "ranks": ranks,
        "job_step_ms": job,
        "job_step_mean_ms": sum(job) / len(job),
        "note": "wall_ms: perf_counter around one iteration on that rank (the ProfilerStep span); "
        "job step = max over ranks of the same iteration",
    }
    (out / "steps.json").write_text(json.dumps(meta, indent=1))
    print(a.job, "job step ms", [round(x, 1) for x in job], "mean", round(meta["job_step_mean_ms"], 1))


if __name__ == "__main__":
    main()
