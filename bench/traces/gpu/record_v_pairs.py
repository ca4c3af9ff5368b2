#!/usr/bin/env python3
"""Record the v5 - v8 GPU pairs of the accuracy suite (needs torch and a CUDA GPU).

    python bench/traces/gpu/record_v_pairs.py OUT_DIR

Shapes the shared q5 / q6 pairs do not have, so the named optimisations are checked on
workloads their models were not written against:

- ``v5_cuda_graph_l16``: a launch-bound MLP step (256 x 256, 16 layers, batch 32, SGD),
  eager vs the whole step captured in one CUDA graph (``--apply cuda-graphs``);
- ``v6_amp_d8192``: a GPU-bound MLP step (8192 x 8192, 2 layers, batch 4096), FP32 with TF32
  off vs bf16 autocast; the "after" step stays GPU-bound (``--apply bf16``);
- ``v7_conv_amp``: a small conv net (four 3x3 convolutions, 64-256 channels, 128 x 128
  images, batch 64, NCHW), FP32 vs bf16 autocast (``--apply bf16``);
- ``v8_log_sync``: a GPU-bound MLP step (2048 x 2048, 8 layers, batch 1024) followed by CPU
  work; "before" logs ``loss.item()`` inside ``record_function("log_loss")`` ahead of the CPU
  work, "after" keeps the scope without the ``.item()`` (``--apply no-sync:log_loss``).

Each trace gets a ``.steps.json`` with the median wall time of its 8 profiled steps (measured
around the same span as ``ProfilerStep#N``); the "before" sidecar names the optimisation
(``apply``) and the error goal, which is how the accuracy suite finds the pair.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from record import autocast_step, eager_step, graphed_step  # beside this script
from torch.profiler import ProfilerActivity, profile, record_function, schedule

DEV = "cuda"
STEPS = 8


def mlp(d: int, layers: int) -> torch.nn.Module:
    mods = [m for _ in range(layers) for m in (torch.nn.Linear(d, d), torch.nn.GELU())]
    return torch.nn.Sequential(*mods).to(DEV)


def record(out: Path, name: str, step: Callable[[], None]) -> None:
    """Profile ``step`` (1 wait, 2 warm-up, STEPS active); write the trace and its sidecar."""
    tmp = out / f"{name}.pt.trace.json"
    walls = []
    sched = schedule(wait=1, warmup=2, active=STEPS)
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(
        activities=acts, schedule=sched, on_trace_ready=lambda p: p.export_chrome_trace(str(tmp))
    ) as p:
        t = time.perf_counter()
        for _ in range(STEPS + 3):
            step()
            walls.append((time.perf_counter() - t) * 1e3)
            p.step()
            t = time.perf_counter()
    torch.cuda.synchronize()
    active = sorted(walls[3:])
    side = {"median_active_ms": (active[3] + active[4]) / 2, "wall_ms_active": walls[3:]}
    side["device"] = torch.cuda.get_device_name()
    (out / f"{name}.steps.json").write_text(json.dumps(side, indent=1))
    with gzip.open(out / f"{name}.pt.trace.json.gz", "wb") as fh:
        fh.write(tmp.read_bytes())
    tmp.unlink()


def setup(d: int, layers: int, batch: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Tensor]:
    model = mlp(d, layers)
    return model, torch.optim.SGD(model.parameters(), lr=1e-4), torch.randn(batch, d, device=DEV)


def graph_pair(out: Path, stem: str, d: int, layers: int, batch: int) -> None:
    model, opt, x = setup(d, layers, batch)
    eager = eager_step(model, opt, x)
    for _ in range(3):
        eager()
    record(out, f"{stem}_before", eager)
    replay = graphed_step(model, opt, x)
    for _ in range(3):
        replay()
    record(out, f"{stem}_after", replay)


def amp_pairs(out: Path, stem: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    for amp, role in ((False, "before"), (True, "after")):
        step = autocast_step(model, opt, x, amp)
        for _ in range(3):
            step()
        record(out, f"{stem}_{role}", step)


def conv_net() -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    channels = 3
    for width in (64, 128, 128, 256):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.ReLU()]
        channels = width
    head = [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 10)]
    return torch.nn.Sequential(*layers, *head).to(DEV)


def log_sync_pair(out: Path, stem: str) -> None:
    model, opt, x = setup(2048, 8, 1024)
    for blocking, role in ((True, "before"), (False, "after")):

        def step(blocking: bool = blocking) -> None:
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            with record_function("log_loss"):
                _ = loss.item() if blocking else loss.detach()
            torch.randn(1000, 1000).sin().sum()  # CPU work of the step (the next batch, say)
            loss.item()

        for _ in range(3):
            step()
        record(out, f"{stem}_{role}", step)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    graph_pair(out, "v5_cuda_graph_l16", 256, 16, 32)
    amp_pairs(out, "v6_amp_d8192", mlp(8192, 2), torch.randn(4096, 8192, device=DEV))
    torch.backends.cudnn.allow_tf32 = False
    amp_pairs(out, "v7_conv_amp", conv_net(), torch.randn(64, 3, 128, 128, device=DEV))
    log_sync_pair(out, "v8_log_sync")


if __name__ == "__main__":
    main()
