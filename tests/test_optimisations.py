"""Named optimisations (``--apply``): the registry, and each model on a synthetic step with a
hand-computed answer (cuda-graphs, bf16 by time and from recorded shapes, no-sync, overlap).
The CLI, stored scenarios, opportunities and the What-if page are in
``test_optimisations_surfaces.py``; the recorded GPU pairs in ``test_optimisations_gpu_pairs.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctda.whatif import optimisations as opt
from ctda.whatif.effect import NEVER, Effect
from ctda.whatif.optimisations import common, cuda_graphs, devices, shapes
from ctda.whatif.scenario import run
from tests import synth
from tests.optimisation_steps import LAUNCH_BOUND, US, _a, _step, _step_ns


def _work(cat: str, name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    ev = synth.kernel(name, ts, dur, corr, stream)
    ev["cat"] = cat
    return ev


# --- registry -------------------------------------------------------------------------------


def test_registry_lists_the_builtins_with_docs() -> None:
    reg = opt.registry()
    assert list(reg)[:5] == ["cuda-graphs", "bf16", "fp16", "no-sync", "overlap"]
    for o in reg.values():
        assert o.summary, o.name
        assert o.needs_arg == (o.name in {"no-sync", "overlap"})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tf32", "unknown optimisation 'tf32'; choose from cuda-graphs"),
        ("no-sync", "needs an argument: no-sync:NAME"),
        ("bf16:x", "takes no argument"),
    ],
)
def test_bad_specs_are_one_line_errors(tmp_path: Path, spec: str, message: str) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    with pytest.raises(opt.OptimisationError, match=message):
        opt.apply(a, [spec])


def test_a_plugin_declares_one_more_file(tmp_path: Path) -> None:
    """An installed package's entry point (group ctda.optimisations) adds an optimisation."""
    (tmp_path / "ctda_plugin_noop.py").write_text(
        "from ctda.whatif.effect import Effect\n"
        "from ctda.whatif.optimisations import optimisation\n\n"
        "@optimisation('plugin-noop')\n"
        "def noop(a, arg):\n"
        "    '''Changes nothing.'''\n"
        "    return Effect.identity('plugin-noop', a.nodes.n)\n"
    )
    dist = tmp_path / "ctda_plugin_noop-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ctda-plugin-noop\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctda.optimisations]\nnoop = ctda_plugin_noop\n")
    sys.path.insert(0, str(tmp_path))
    try:
        opt._LOADED = False
        assert "plugin-noop" in opt.registry()
        a = _a(tmp_path, LAUNCH_BOUND)
        assert _step_ns(a, "plugin-noop") == 200 * US
    finally:
        sys.path.remove(str(tmp_path))
        opt._REGISTRY.pop("plugin-noop", None)
        sys.modules.pop("ctda_plugin_noop", None)


def test_effects_compose_and_never_unbinds(tmp_path: Path) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    base = run(a, [])
    assert int(base.step_times().predicted_ns.iloc[0]) == 200 * US
    # the sync edge into cudaStreamSynchronize: made unable to bind, the call ends after its
    # own 2 µs floor, and .item() no longer waits for k3
    e = Effect.identity("x", a.nodes.n)
    e.set_edges(np.flatnonzero(common.sync_edges(a)), NEVER)
    sc = run(a, [], effects=[e])
    # sync start 125 -> end 127 -> item end 132 -> step end 162
    assert int(sc.step_times().predicted_ns.iloc[0]) == 162 * US


# --- cuda-graphs ------------------------------------------------------------------------------


def test_cuda_graphs_collapses_the_host_side(tmp_path: Path) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    # lead-in 10 + graph launch 3 x 1.3 -> host at 13.9; k1 at +6.0, then 5 + 0.29 + 5 + 0.29 + 50;
    # the sync ends 3 after k3 (as observed), .item() 5 later; the tail after it goes
    k3_end = 10 + 3 * 1.3 + 6.0 + 5 + 0.29 + 5 + 0.29 + 50
    assert _step_ns(a, "cuda-graphs") == round((k3_end + 3 + 5) * US)
    eff = opt.apply(a, ["cuda-graphs"])[0]
    assert any("1.30 µs per device work item (3 per region" in x for x in eff.assumptions)
    assert any("constants measured" in x for x in eff.assumptions)


def test_cuda_graphs_leaves_threads_that_launch_nothing(tmp_path: Path) -> None:
    a = _a(tmp_path, [*LAUNCH_BOUND, synth.cpu("log_metrics", 50, 100, tid=synth.AUX)])
    eff = opt.apply(a, ["cuda-graphs"])[0]
    nm = a.table.decoded("name", a.nodes.uid)
    factor = dict(zip((str(x) for x in nm), eff.factor))
    assert factor["log_metrics"] == 1.0 and factor["aten::a"] == 0.0


def test_cuda_graphs_reads_costs_off_graph_launches_in_the_trace(tmp_path: Path) -> None:
    events = [
        *LAUNCH_BOUND,
        synth.cpu("ProfilerStep#2", 300, 100, cat="user_annotation"),
        synth.runtime("cudaGraphLaunch", 310, 40, corr=9),
        synth.kernel("g1", 352, 10, corr=9),
        synth.kernel("g2", 362.5, 10, corr=9),
    ]
    a = _a(tmp_path, events)
    node, start, gap, source = cuda_graphs._measured(a)
    assert (node, start, gap) == (20 * US, 2 * US, 500)
    assert "1 graph launch" in source


def test_cuda_graphs_on_a_named_region_keeps_the_rest(tmp_path: Path) -> None:
    events = [*LAUNCH_BOUND, synth.cpu("fwd", 55, 62, cat="user_annotation")]  # around b and c
    a = _a(tmp_path, events)
    eff = opt.apply(a, ["cuda-graphs:fwd"])[0]
    gone = set(np.flatnonzero(eff.factor == 0).tolist())
    nm = a.table.decoded("name", a.nodes.uid)
    assert {str(nm[i]) for i in gone} == {"aten::b", "aten::c", "cudaLaunchKernel"}
    assert len(gone) == 4
    with pytest.raises(opt.OptimisationError, match="no host event inside"):
        opt.apply(a, ["cuda-graphs:cudaStreamSynchronize"])  # a leaf: nothing to collapse
    with pytest.raises(opt.OptimisationError, match="no region matches 'k1'"):
        opt.apply(a, ["cuda-graphs:k1"])  # a kernel, not a host event


def test_cuda_graphs_step_range(tmp_path: Path) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    assert _step_ns(a, "cuda-graphs:steps=1-1") == _step_ns(a, "cuda-graphs")
    with pytest.raises(opt.OptimisationError, match="no region"):
        opt.apply(a, ["cuda-graphs:steps=5-6"])


# --- bf16 -------------------------------------------------------------------------------------

H100 = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8"
GPU_BOUND = [
    _step(1600),
    synth.cpu("aten::linear", 10, 30),
    synth.cpu("aten::addmm", 12, 25),
    synth.runtime("cudaLaunchKernel", 15, 8, corr=1),
    synth.kernel(GEMM, 30, 1340, corr=1),
    synth.cpu("aten::gelu", 40, 20),
    synth.runtime("cudaLaunchKernel", 45, 8, corr=2),
    synth.kernel("vectorized_elementwise_kernel<GeluCUDAKernelImpl>", 1371, 101, corr=2),
    synth.cpu("aten::fill_", 70, 20),
    synth.runtime("cudaLaunchKernel", 75, 8, corr=3),
    synth.kernel("vectorized_elementwise_kernel<FillFunctor>", 1473, 1, corr=3),
    synth.cpu("aten::item", 100, 1400),
    synth.runtime("cudaStreamSynchronize", 110, 1385, corr=4),
]


def test_bf16_roofline_and_casts(tmp_path: Path) -> None:
    a = _a(tmp_path, GPU_BOUND, **H100)
    eff = opt.apply(a, ["bf16"])[0]
    nm = a.table.decoded("name", a.nodes.uid)
    idx = {str(n): i for i, n in enumerate(nm)}
    # 3 casts (weight, bias, the step's input): 20 µs host each (median of gelu, fill_),
    # 0.75 x 51 µs device each (the median memory-bound kernel)
    gemm = 1340 * 67.0 / 989.4
    assert eff.factor[idx[GEMM]] == pytest.approx((gemm + 3 * 0.75 * 51) / 1340)
    assert eff.factor[idx["vectorized_elementwise_kernel<GeluCUDAKernelImpl>"]] == pytest.approx(51 / 101)
    assert eff.factor[idx["vectorized_elementwise_kernel<FillFunctor>"]] == 1.0  # at the 1 µs floor
    assert eff.factor[idx["aten::linear"]] == pytest.approx(3.0)  # (30 + 3 x 20) / 30, inclusive
    assert eff.factor[idx["aten::addmm"]] == pytest.approx(3.0)
    assert any("3 casts added" in x and "20.0 µs host" in x for x in eff.assumptions)
    # the replay: the gemm is launched 10 µs later (the linear's first segments tripled) and
    # still waits 15 µs for its launch; then the kernels back to back (1 µs gaps as observed);
    # the sync ends 21 after the last, .item() 5 later, the step 100 after that
    gemm_end = 25 + 15 + gemm + 3 * 0.75 * 51
    end = gemm_end + 1 + 51 + 1 + 1 + 21 + 5 + 100
    assert _step_ns(a, "bf16") == pytest.approx(end * US, abs=3)


def test_unknown_devices_fall_back_to_h100_and_say_so(tmp_path: Path) -> None:
    a = _a(tmp_path, GPU_BOUND, deviceProperties=[{"id": 0, "name": "Mystery GPU"}])
    eff = opt.apply(a, ["bf16"])[0]
    assert "not in the peak table" in eff.assumptions[0]
    assert devices.peaks_of(a)[0].name == "H100 SXM"


def test_kernel_classes_by_name() -> None:
    names = np.array(
        [
            GEMM,
            "nvjet_sm90_tst_128x256_bf16",
            "cutlass_80_tensorop_tf32_s1688gemm",
            "cublasLt::splitKreduce_kernel",
            "vectorized_elementwise_kernel<float>",
            "cudnn::conv2d_fprop",
        ],
        dtype=object,
    )
    assert devices.is_matrix(names).tolist() == [True, True, True, False, False, True]
    assert devices.precision(names).tolist() == [0, 2, 1, 0, 0, 0]


# --- no-sync, overlap -------------------------------------------------------------------------

LOGGING = [
    _step(1100),
    synth.cpu("aten::mm", 10, 20),
    synth.runtime("cudaLaunchKernel", 12, 8, corr=1),
    synth.kernel(GEMM, 25, 1000, corr=1),
    synth.cpu("log_loss", 40, 1000, cat="user_annotation"),
    synth.cpu("aten::item", 45, 990),
    synth.runtime("cudaStreamSynchronize", 50, 980, corr=2),
    synth.cpu("aten::add", 1050, 20),
]


def test_no_sync_keeps_the_host_cost(tmp_path: Path) -> None:
    a = _a(tmp_path, LOGGING)
    # the sync call keeps its 2 µs floor: 52, then item +5, log_loss +5, gap 10, add 20, tail 30
    assert _step_ns(a, "no-sync:log_loss") == 122 * US
    with pytest.raises(opt.OptimisationError, match="no event named 'nope'"):
        opt.apply(a, ["no-sync:nope"])
    assert opt.registry()["no-sync"].specs_for(a) == ["no-sync:log_loss"]


COPY_FIRST = [
    _step(800),
    synth.runtime("cudaMemcpyAsync", 10, 10, corr=1),
    _work("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 25, 500, corr=1),
    synth.cpu("aten::mm", 30, 20),
    synth.runtime("cudaLaunchKernel", 35, 10, corr=2),
    synth.kernel(GEMM, 526, 200, corr=2),
    synth.runtime("cudaStreamSynchronize", 60, 680, corr=3),
]


def test_overlap_takes_a_copy_off_the_compute_stream(tmp_path: Path) -> None:
    a = _a(tmp_path, COPY_FIRST)
    # the kernel no longer queues behind the copy: launched at 35 (+3 floor), 200 long;
    # the sync ends 14 after it, the step 60 after that
    assert _step_ns(a, "overlap:Memcpy HtoD") == (38 + 200 + 14 + 60) * US
    assert "overlap:Memcpy HtoD" in opt.registry()["overlap"].specs_for(a)


# a pageable host-to-device copy issued by `.to()`: the launch call blocks while the driver
# stages the data (the copy's 400 µs), then the op synchronises its stream; the compute after it
PAGEABLE = [
    _step(700),
    synth.cpu("aten::copy_", 10, 430),
    synth.runtime("cudaMemcpyAsync", 12, 405, corr=1),
    _work("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 15, 400, corr=1),
    synth.runtime("cudaStreamSynchronize", 420, 15, corr=3),
    synth.cpu("aten::mm", 450, 20),
    synth.runtime("cudaLaunchKernel", 452, 10, corr=2),
    synth.kernel(GEMM, 465, 200, corr=2),
    synth.runtime("cudaStreamSynchronize", 470, 200, corr=4),
]


def test_overlap_issues_a_pageable_copy_asynchronously(tmp_path: Path) -> None:
    a = _a(tmp_path, PAGEABLE)
    base = _step_ns(a)
    # the copy's 400 µs leave the host: its launch call keeps a launch's cost (the median
    # launch call, 10 µs) and the sync inside the copy op no longer waits (at most its own
    # 15 µs go with it); the final sync still waits for the GEMM
    saved = base - _step_ns(a, "overlap:Memcpy HtoD")
    assert (405 - 10) * US <= saved <= (405 - 10 + 15) * US
    eff = opt.apply(a, ["overlap:Memcpy HtoD"])[0]
    assert any("1 launch calls that blocked" in x and "1 operators" in x for x in eff.assumptions)


# --- bf16 from recorded shapes ----------------------------------------------------------------

M, K, N = 8192, 64, 8192  # a wide, shallow product: compute bound in FP32, memory bound in BF16
ADDMM_SHAPES = {
    "Input Dims": [[N], [M, K], [K, N], [], []],
    "Input type": ["float", "float", "float", "Scalar", "Scalar"],
    "Concrete Inputs": ["", "", "", "1", "1"],
}
CONV_SHAPES = {  # cudnn_convolution(input, weight, padding, stride, dilation, groups, ...)
    "Input Dims": [[64, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], []],
    "Input type": ["float", "float", *["ScalarList"] * 3, *["Scalar"] * 4],
    "Concrete Inputs": ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "False"],
}


def _with_shapes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "args": {**e["args"], **ADDMM_SHAPES}} if e["name"] == "aten::addmm" else e for e in events]


def test_flops_and_bytes_from_recorded_shapes(tmp_path: Path) -> None:
    conv = synth.cpu("aten::cudnn_convolution", 1500, 10, **CONV_SHAPES)
    a = _a(tmp_path, [*_with_shapes(GPU_BOUND), conv], **H100)
    w = shapes.op_work(a)
    idx = {str(x): i for i, x in enumerate(a.table.decoded("name", a.nodes.uid))}
    mm = idx["aten::addmm"]
    assert w.flops[mm] == 2.0 * M * K * N
    assert w.nbytes[mm] == 4.0 * (N + M * K + K * N + M * N)  # bias, operands, result
    # stride 2, padding 1: 28 x 28 outputs per channel, 64 x 3 x 3 multiply-adds each
    assert w.flops[idx["aten::cudnn_convolution"]] == 2.0 * 64 * 128 * 28 * 28 * 64 * 9
    assert np.isnan(w.flops[idx["aten::gelu"]]) and np.isnan(w.flops[idx["aten::linear"]])
    # the gemm is mapped to its innermost shaped op through its launch
    assert shapes.kernel_ops(a, np.array([idx[GEMM]])).tolist() == [mm]


def test_bf16_uses_the_roofline_where_shapes_are_recorded(tmp_path: Path) -> None:
    a = _a(tmp_path, _with_shapes(GPU_BOUND), **H100)
    eff = opt.apply(a, ["bf16"])[0]
    gemm = {str(x): i for i, x in enumerate(a.table.decoded("name", a.nodes.uid))}[GEMM]
    flops, nbytes = 2.0 * M * K * N, 4.0 * (N + M * K + K * N + M * N)
    share = max(flops / 67e3, nbytes / 3.35e3) / 1340e3  # of the FP32 roofline, ns
    half = max(flops / 989.4e3, nbytes / 2 / 3.35e3) / share / 1e3  # µs: memory bound in BF16
    assert half > 1340 * 67.0 / 989.4 * 4  # the time path would have scaled it by the peaks
    assert eff.factor[gemm] == pytest.approx((half + 3 * 0.75 * 51) / 1340)
    assert any("shapes recorded: 1 matrix kernels of 1 operators" in x for x in eff.assumptions)
    plain = opt.apply(_a(tmp_path, GPU_BOUND, **H100), ["bf16"])[0]
    assert any("no tensor shapes recorded" in x for x in plain.assumptions)
    # recorded inputs already in BF16: the product stays whatever its kernel is called
    halved = [
        {**e, "args": {**e["args"], "Input type": ["c10::BFloat16"] * 3 + ["Scalar"] * 2}}
        if e["name"] == "aten::addmm"
        else e
        for e in _with_shapes(GPU_BOUND)
    ]
    eff = opt.apply(_a(tmp_path, halved, **H100), ["bf16"])[0]
    assert eff.factor[gemm] == 1.0
    assert any("1 with half-precision inputs stay" in x for x in eff.assumptions)
