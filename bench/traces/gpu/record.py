#!/usr/bin/env python3
"""Record real PyTorch profiler traces of small GPU training steps as before/after pairs for
the GPU what-if accuracy suite (``make bench``, suite *accuracy*).

Usage (on a CUDA machine, in an environment with torch and triton; ctda itself needs neither):

    python bench/traces/gpu/record.py --out bench/traces/gpu [--only s1,n1,...] [--rounds 2]

Every pair changes one thing a user would change, and its scenario is written here, before
the run, from the change alone: a ``scale`` spec (``ctda whatif --scale``) where the change
is a known factor, an ``apply`` spec (``ctda whatif --apply``, a named optimisation) where
it is a real optimisation whose size is not known in advance.

  s1_sync_free      host-bound step: per layer, pure-Python host work then one fp32 GEMM,
                    and a ``.item()`` at the step's end that did not wait in "before" (the
                    GPU had finished). after: the host work is a third; the GPU now bounds.
                    scale: name~host_prep=0.3333
  s2_sync_events    s1 recorded with the profiler's CUDA sync events (stream and event ids)
  s3_sync_late      as s1, but each layer launches its GEMM before its host work: the GPU is
                    idle long before the closing ``.item()`` in "before", so that sync never
                    waited. scale: name~host_prep=0.3333
  s4_sync_late_events  s3 with CUDA sync events
  n1_log_item       a logging ``.item()`` after the forward, inside record_function
                    ("log_loss"), followed by host bookkeeping that could have overlapped
                    the forward. after: the loss is kept on the device (no wait).
                    apply: no-sync:log_loss
  c1_cuda_graph     a launch-bound MLP step (32 x 256, 16 layers, SGD with momentum), eager
                    vs the whole step captured in one CUDA graph. apply: cuda-graphs
  b1_bf16_conv      a small conv net (64 x 64 x 56 x 56) in fp32 (TF32 off) vs bf16
                    autocast. apply: bf16
  b2_bf16_mlp       an MLP (8192 x 2048, 3 layers) in fp32 (TF32 off) vs bf16 autocast.
                    apply: bf16
  g1_bf16_transformer  a 6-layer transformer encoder (d 768, seq 256, batch 16) in fp32 vs
                    bf16 autocast. apply: bf16
  g2_graph_transformer a launch-bound 4-layer transformer encoder (d 256, seq 64, batch 8),
                    eager vs one CUDA graph. apply: cuda-graphs
  p1_prefetch       a conv step fed from a pageable host batch copied synchronously
                    (record_function "h2d_copy") vs the next batch copied from pinned memory
                    on a side stream while the step computes. apply: overlap:h2d_copy

For each trace NAME: OUT/NAME.pt.trace.json.gz and OUT/NAME.steps.json (per-step wall times
measured over the same interval as ``ProfilerStep#i``; the scenario; GPU and torch version).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

DEV = torch.device("cuda")
WAIT, WARMUP = 1, 2
#: ``--shapes``: record operator input shapes too (``record_shapes=True``), named ``*_shapes_*``
SHAPES = {"on": False}


def sync() -> None:
    torch.cuda.synchronize()


def spin(n: int) -> float:
    """Pure-Python host work whose time is linear in n (holds the GIL, like real glue code)."""
    acc = 0.0
    for k in range(n):
        acc += (k * 0.5) % 3.0
    return acc


def time_ms(fn: Callable[[], Any], reps: int = 5) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e3 / reps


def spin_for(target_ms: float) -> int:
    """n for which spin(n) takes about target_ms."""
    n = 20000
    ms = time_ms(lambda: spin(n))
    return max(100, int(n * target_ms / max(ms, 1e-3)))


class MLP(torch.nn.Module):
    def __init__(self, d: int, layers: int):
        super().__init__()
        mods: list[torch.nn.Module] = []
        for _ in range(layers):
            mods += [torch.nn.Linear(d, d), torch.nn.GELU()]
        self.net = torch.nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def convnet(c_in: int = 64, c: int = 128) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(c_in, c, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(c, 10),
    )


def profiled(
    name: str, out: Path, steps: int, step_fn: Callable[[int], None], meta: dict, sync_events: bool = False
) -> None:
    """Run step_fn for WAIT + WARMUP + steps iterations under the profiler (CPU + CUDA,
    default settings); write the trace and its steps.json."""
    kw: dict[str, Any] = {"record_shapes": SHAPES["on"]}
    if SHAPES["on"]:
        name = name.replace("_before", "_shapes_before").replace("_after", "_shapes_after")
    if sync_events:
        kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    walls: list[float] = []
    tmp = out / f"{name}.pt.trace.json"
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(
        activities=acts,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=steps),
        on_trace_ready=lambda p: p.export_chrome_trace(str(tmp)),
        **kw,
    ) as prof:
        t_prev = time.perf_counter()
        for i in range(WAIT + WARMUP + steps):
            step_fn(i)
            t = time.perf_counter()
            walls.append((t - t_prev) * 1e3)
            prof.step()
            t_prev = time.perf_counter()
    sync()
    raw = tmp.read_bytes()  # the trace names itself by its file name, not the machine's path
    raw = re.sub(rb'"traceName": "[^"]*"', f'"traceName": "{name}.pt.trace.json"'.encode(), raw, count=1)
    with gzip.open(out / f"{name}.pt.trace.json.gz", "wb", compresslevel=9) as g:
        g.write(raw)
    tmp.unlink()
    active = walls[WAIT + WARMUP :]
    info = dict(
        meta,
        name=name,
        profiled_steps=steps,
        wall_ms_all=walls,
        wall_ms_active=active,
        median_active_ms=float(np.median(active)),
        json_bytes=len(raw),
        torch=torch.__version__,
        device=torch.cuda.get_device_name(),
        sync_events=sync_events,
        record_shapes=SHAPES["on"],
    )
    (out / f"{name}.steps.json").write_text(json.dumps(info, indent=1))
    print(
        f"{name}: median active step {info['median_active_ms']:.3f} ms, json {len(raw) / 1e6:.1f} MB",
        flush=True,
    )


def run_pair(
    out: Path,
    key: str,
    rnd: int,
    steps: int,
    variants: Sequence[tuple[str, Callable[..., None], dict[str, Any]]],
    sync_events: bool = False,
) -> None:
    for tag, fn, meta in variants:
        for i in range(3):  # unprofiled warm-up
            fn(i)
        sync()
        profiled(f"{key}_{tag}_r{rnd}", out, steps, fn, dict(meta, role=tag), sync_events)


def sync_pair(out: Path, rnd: int, steps: int, key: str, launch_first: bool, sync_events: bool) -> None:
    """A host-bound step: per layer, pure-Python host work (``host_prep``, twice the GEMM's
    time in "before", a third of that in "after") and one fp32 GEMM, then one ``.item()``.
    ``launch_first``: each layer launches its GEMM before its host work, so in "before" the
    GPU is idle long before the closing ``.item()`` (that sync never waited); otherwise the
    last GEMM is still running when the host reaches it."""
    d, layers = 3072, 10
    a = torch.randn(d, d, device=DEV)
    ws = [torch.randn(d, d, device=DEV) / d**0.5 for _ in range(layers)]
    gemm_ms = time_ms(lambda: a @ ws[0])
    n_before = spin_for(2.0 * gemm_ms)
    variants = []
    for tag, n in (("before", n_before), ("after", max(1, n_before // 3))):

        def step(i: int, n: int = n) -> None:
            h = a
            for w in ws:
                if launch_first:
                    h = torch.tanh(h @ w)
                with record_function("host_prep"):
                    spin(n)
                if not launch_first:
                    h = torch.tanh(h @ w)
            h.sum().item()  # the step's only sync

        meta = dict(
            pair=key,
            gemm_ms=gemm_ms,
            spin_n=n,
            change="per-layer host work cut to a third",
            scenario="--scale 'name~host_prep=0.3333'",
        )
        variants.append((tag, step, meta))
    run_pair(out, key, rnd, steps, variants, sync_events)


def pair_n1(out: Path, rnd: int, steps: int) -> None:
    d, layers, batch = 4096, 6, 2048
    model = MLP(d, layers).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, d, device=DEV)
    fwd_ms = time_ms(lambda: model(x))
    n_book = spin_for(0.8 * fwd_ms)  # host bookkeeping a little shorter than the forward
    logged: list[Any] = []
    variants = []
    for tag, wait in (("before", True), ("after", False)):

        def step(i: int, wait: bool = wait) -> None:
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            with record_function("log_loss"):
                logged.append(loss.item() if wait else loss.detach())
            with record_function("bookkeeping"):
                spin(n_book)
            loss.backward()
            opt.step()
            with record_function("step_end"):
                torch.cuda.current_stream().synchronize()
            del logged[:-4]

        variants.append(
            (
                tag,
                step,
                dict(
                    pair="n1_log_item",
                    fwd_ms=fwd_ms,
                    spin_n=n_book,
                    change="the logged loss kept on the device instead of .item()",
                    apply="no-sync:log_loss",
                ),
            )
        )
    run_pair(out, "n1_log_item", rnd, steps, variants)


def eager_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> Callable[..., None]:
    """One eager training step ending in the loss's ``.item()`` (the step's only sync)."""

    def step(*_: Any) -> None:
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        loss.item()

    return step


def graphed_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> Callable[..., None]:
    """The same step captured in one CUDA graph (PyTorch's whole-network capture recipe:
    warm-up on a side stream, then capture); each call replays it and reads the loss."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = model(x).square().mean()
        static_loss.backward()
        opt.step()

    def step(*_: Any) -> None:
        g.replay()
        static_loss.item()

    return step


def autocast_step(
    model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, amp: bool
) -> Callable[..., None]:
    """One training step, its forward under bf16 autocast when ``amp`` (fp32 otherwise)."""

    def step(*_: Any) -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out_ = model(x)
        loss = out_.float().square().mean()
        loss.backward()
        opt.step()
        loss.item()

    return step


def graph_pair(out: Path, rnd: int, steps: int, key: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    meta = dict(pair=key, change="the whole step captured in one CUDA graph", apply="cuda-graphs")
    run_pair(out, key, rnd, steps, [("before", eager_step(model, opt, x), meta)])
    run_pair(out, key, rnd, steps, [("after", graphed_step(model, opt, x), meta)])


def pair_c1(out: Path, rnd: int, steps: int) -> None:
    graph_pair(out, rnd, steps, "c1_cuda_graph", MLP(256, 16).to(DEV), torch.randn(32, 256, device=DEV))


def amp_pair(out: Path, rnd: int, steps: int, key: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    variants = [
        (
            tag,
            autocast_step(model, opt, x, amp),
            dict(pair=key, change="bf16 autocast" if amp else "fp32 (TF32 off)", apply="bf16"),
        )
        for tag, amp in (("before", False), ("after", True))
    ]
    run_pair(out, key, rnd, steps, variants)


def pair_b1(out: Path, rnd: int, steps: int) -> None:
    model = convnet().to(DEV)
    x = torch.randn(64, 64, 56, 56, device=DEV)
    amp_pair(out, rnd, steps, "b1_bf16_conv", model, x)


def pair_b2(out: Path, rnd: int, steps: int) -> None:
    model = MLP(2048, 3).to(DEV)
    x = torch.randn(8192, 2048, device=DEV)
    amp_pair(out, rnd, steps, "b2_bf16_mlp", model, x)


def pair_p1(out: Path, rnd: int, steps: int) -> None:
    model = convnet(3, 48).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    shape = (64, 3, 192, 192)
    pageable = [torch.randn(shape) for _ in range(2)]
    pinned = [t.pin_memory() for t in pageable]
    copy_stream = torch.cuda.Stream()
    meta = dict(
        pair="p1_prefetch",
        change="next batch copied from pinned memory on a side stream during the step",
        apply="overlap:h2d_copy",
    )

    def train(xb: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss = model(xb).square().mean()
        loss.backward()
        opt.step()
        loss.item()

    def before(i: int) -> None:
        with record_function("h2d_copy"):
            xb = pageable[i % 2].to(DEV)
        train(xb)

    state: dict[str, Any] = {}

    def issue(i: int) -> None:
        with torch.cuda.stream(copy_stream), record_function("h2d_copy"):
            state["next"] = pinned[i % 2].to(DEV, non_blocking=True)

    def after(i: int) -> None:
        if "next" not in state:
            issue(i)
        torch.cuda.current_stream().wait_stream(copy_stream)
        xb = state.pop("next")
        xb.record_stream(torch.cuda.current_stream())
        issue(i + 1)
        train(xb)

    run_pair(out, "p1_prefetch", rnd, steps, [("before", before, meta), ("after", after, meta)])


def transformer(d: int, layers: int, heads: int) -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def pair_g1(out: Path, rnd: int, steps: int) -> None:
    model = transformer(768, 6, 12).to(DEV)
    x = torch.randn(16, 256, 768, device=DEV)
    amp_pair(out, rnd, steps, "g1_bf16_transformer", model, x)


def pair_g2(out: Path, rnd: int, steps: int) -> None:
    graph_pair(
        out,
        rnd,
        steps,
        "g2_graph_transformer",
        transformer(256, 4, 4).to(DEV),
        torch.randn(8, 64, 256, device=DEV),
    )


def pair_b3(out: Path, rnd: int, steps: int) -> None:
    # other shapes than b1: few input channels, wider layers, a smaller batch
    model = convnet(3, 96).to(DEV)
    x = torch.randn(32, 3, 128, 128, device=DEV)
    amp_pair(out, rnd, steps, "b3_bf16_conv_wide", model, x)


def pair_c2(out: Path, rnd: int, steps: int) -> None:
    # other shapes than c1: a deeper, wider MLP on a larger batch
    graph_pair(out, rnd, steps, "c2_cuda_graph_deep", MLP(512, 24).to(DEV), torch.randn(64, 512, device=DEV))


def pair_g3(out: Path, rnd: int, steps: int) -> None:
    # other shapes than g1: a narrower, shallower encoder on longer-batch input
    model = transformer(512, 4, 8).to(DEV)
    x = torch.randn(32, 128, 512, device=DEV)
    amp_pair(out, rnd, steps, "g3_bf16_transformer_small", model, x)


PAIRS: dict[str, Callable[[Path, int, int], None]] = {
    "s1": lambda out, rnd, steps: sync_pair(out, rnd, steps, "s1_sync_free", False, False),
    "s2": lambda out, rnd, steps: sync_pair(out, rnd, steps, "s2_sync_events", False, True),
    "s3": lambda out, rnd, steps: sync_pair(out, rnd, steps, "s3_sync_late", True, False),
    "s4": lambda out, rnd, steps: sync_pair(out, rnd, steps, "s4_sync_late_events", True, True),
    "n1": pair_n1,
    "c1": pair_c1,
    "b1": pair_b1,
    "b2": pair_b2,
    "p1": pair_p1,
    "g1": pair_g1,
    "g2": pair_g2,
    "b3": pair_b3,
    "c2": pair_c2,
    "g3": pair_g3,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=",".join(PAIRS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--shapes", action="store_true", help="also record operator input shapes")
    a = ap.parse_args()
    SHAPES["on"] = a.shapes
    if not torch.cuda.is_available():
        raise SystemExit("record.py: needs a CUDA device")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.time()
    for rnd in range(1, a.rounds + 1):
        for key in a.only.split(","):
            try:
                PAIRS[key](out, rnd, a.steps)
            except Exception as e:
                print(f"{key} round {rnd} FAILED: {type(e).__name__}: {e}", flush=True)
            print(f"{key} round {rnd} done at {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
