"""Named optimisations (``--apply``): the registry, each model on a synthetic step with a
hand-computed answer, the CLI, stored scenarios, opportunities, and the shared GPU pairs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import ctda
from ctda.analysis.engine import Analysis, AnalysisOptions, analyze
from ctda.cli.app import _register
from ctda.cli.common import app
from ctda.ingest.reader import read_trace
from ctda.store.config import resolve
from ctda.store.ingest import ingest
from ctda.whatif import optimisations as opt
from ctda.whatif.effect import NEVER, Effect
from ctda.whatif.opportunities import by_optimisation
from ctda.whatif.optimisations import common, cuda_graphs, devices, shapes
from ctda.whatif.scenario import run
from tests import synth
from tests.conftest import CORPUS, SKIP_CORPUS
from tests.test_ui_pages import DATA as HTA_DATA
from tests.test_ui_pages import MINITOY
from tests.test_ui_pages import app as ui_app
from tests.test_ui_pages import ok as ui_ok

US = 1_000
_register()  # the CLI's commands, as the ctda script registers them


def _trace(tmp_path: Path, events: list[dict[str, Any]], name: str = "t.json", **top: Any) -> Path:
    return synth.write(tmp_path / name, events, **top)


def _a(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> Analysis:
    return analyze(read_trace(_trace(tmp_path, events, **top)))


def _step_ns(a: Analysis, *specs: str) -> int:
    sc = run(a, [], effects=opt.apply(a, specs))
    return int(sc.step_times().predicted_ns.iloc[0])


def _work(cat: str, name: str, ts: float, dur: float, corr: int, stream: int = 7) -> dict[str, Any]:
    ev = synth.kernel(name, ts, dur, corr, stream)
    ev["cat"] = cat
    return ev


def _step(dur: float) -> dict[str, Any]:
    return synth.cpu("ProfilerStep#1", 0, dur, cat="user_annotation")


# a launch-bound step: three small kernels, each launched by its own op, and a final
# .item() whose cudaStreamSynchronize waits for the last (long) kernel
LAUNCH_BOUND = [
    _step(200),
    synth.cpu("aten::a", 10, 30),
    synth.runtime("cudaLaunchKernel", 20, 10, corr=1),
    synth.kernel("k1", 35, 5, corr=1),
    synth.cpu("aten::b", 60, 30),
    synth.runtime("cudaLaunchKernel", 70, 10, corr=2),
    synth.kernel("k2", 85, 5, corr=2),
    synth.cpu("aten::c", 95, 20),
    synth.runtime("cudaLaunchKernel", 100, 10, corr=3),
    synth.kernel("k3", 112, 50, corr=3),
    synth.cpu("aten::item", 120, 50),
    synth.runtime("cudaStreamSynchronize", 125, 40, corr=4),
]


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


# --- CLI, stored scenarios, opportunities -----------------------------------------------------


def test_cli_prints_the_assumptions_beside_the_answer(tmp_path: Path) -> None:
    trace = _trace(tmp_path, LAUNCH_BOUND)
    cli = CliRunner()
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "cuda-graphs", "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "Assumptions" in r.output and "graph launch 1.30 µs" in r.output
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "cuda-graphs", "--dry-run", "--format", "json"])
    d = json.loads(r.output)
    assert d["applied"] == ["cuda-graphs"] and len(d["assumptions"]) == 3
    assert d["steps"][0]["predicted_ns"] == _step_ns(analyze(read_trace(trace)), "cuda-graphs")
    # combinable with --scale: k3 at half its time
    r = cli.invoke(
        app,
        [
            "whatif",
            str(trace),
            "--apply",
            "cuda-graphs",
            "--scale",
            "name~^k3$=0.5",
            "--format",
            "json",
            "--dry-run",
        ],
    )
    assert json.loads(r.output)["steps"][0]["predicted_ns"] == d["steps"][0]["predicted_ns"] - 25 * US
    r = cli.invoke(app, ["whatif", str(trace), "--apply", "warp-speed", "--dry-run"])
    assert (
        r.exit_code == 2 and "unknown optimisation 'warp-speed'" in r.output and "Traceback" not in r.output
    )


def test_stored_scenarios_keep_the_optimisations(tmp_path: Path) -> None:
    trace = _trace(tmp_path, LAUNCH_BOUND)
    with ctda.open_store(str(tmp_path / "runs.lbug")) as store:
        store.ingest([str(trace)], run="r")
        sc = store.whatif("r", apply=["cuda-graphs"], name="graphed")
        saved = store.scenarios("r")
        back = store.scenario("r", "graphed")
    rec = next(s for s in saved if s["name"] == "graphed")
    assert rec["apply"] == ["cuda-graphs"] and rec["assumptions"] == sc.assumptions
    assert back.step_times().predicted_ns.tolist() == sc.step_times().predicted_ns.tolist()


def test_opportunities_rank_the_optimisations(tmp_path: Path) -> None:
    a = _a(tmp_path, LAUNCH_BOUND)
    df = by_optimisation(a)
    row = df[df.name == "cuda-graphs"].iloc[0]
    assert row.saving_ns == 200 * US - _step_ns(a, "cuda-graphs")
    assert list(df.saving_ns) == sorted(df.saving_ns, reverse=True)
    r = CliRunner().invoke(
        app, ["opportunities", str(_trace(tmp_path, LAUNCH_BOUND, "o.json")), "--format", "json"]
    )
    rows = json.loads(r.output)
    assert any(x["group"] == "optimisation" and x["name"] == "cuda-graphs" for x in rows)


# --- the shared GPU pairs ---------------------------------------------------------------------

GPU = None if CORPUS is None else CORPUS / "generated" / "gpu"


def _median_ms(name: str) -> float:
    assert GPU is not None
    return float(json.loads((GPU / f"{name}.steps.json").read_text())["median_active_ms"])


@SKIP_CORPUS
@pytest.mark.parametrize(
    ("pair", "spec", "after", "bound"),
    [
        ("q5_cuda_graph_before_r1", "cuda-graphs", ["q5_cuda_graph_after_r1"], 0.10),
        ("q5_cuda_graph_before_r2", "cuda-graphs", ["q5_cuda_graph_after_r2"], 0.10),
        ("q6_amp_before_r1", "bf16", ["q6_amp_after_r1", "q6_amp_after_r2"], 0.20),
        ("q6_amp_before_r2", "bf16", ["q6_amp_after_r1", "q6_amp_after_r2"], 0.20),
    ],
)
def test_shared_gpu_pairs(pair: str, spec: str, after: list[str], bound: float) -> None:
    assert GPU is not None
    a = analyze(read_trace(GPU / f"{pair}.pt.trace.json.gz"))
    sc = run(a, [], effects=opt.apply(a, [spec]))
    predicted = float(np.median(sc.step_times().predicted_ns)) / 1e6
    measured = float(np.mean([_median_ms(x) for x in after]))
    assert abs(predicted / measured - 1) <= bound, (predicted, measured)


# --- the What-if page ---------------------------------------------------------------------------


@pytest.fixture
def page_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An embedded store with the page tests' real GPU trace; the app reads it from CTDA_DB."""
    db = tmp_path / "store.lbug"
    ingest(HTA_DATA / f"{MINITOY}.json.gz", resolve(str(db)), AnalysisOptions(), name=MINITOY)
    monkeypatch.setenv("CTDA_DB", str(db))
    monkeypatch.setenv("CTDA_UI_UPLOADS", str(tmp_path / "uploads"))
    return db


def test_whatif_page_applies_a_named_optimisation(page_store: Path) -> None:
    """The page lists the optimisations that apply to the run; picking one predicts with it,
    its assumptions shown, the same answer as the API's."""
    at = ui_app("whatif")
    choices = at.multiselect(key="wi_apply").options
    assert "cuda-graphs" in choices
    # the page opens on the ranking: its optimisation rows are ctda opportunities' rows
    ranked = at.dataframe[0].value
    with ctda.open_store(str(page_store)) as session:
        expected_rows = by_optimisation(session.analysis(MINITOY))
    named = [
        c.removeprefix("named optimisation ") for c in ranked.change if c.startswith("named optimisation ")
    ]
    assert named == [n for n in expected_rows.name if n in named] and named[0] == "cuda-graphs"
    at.multiselect(key="wi_apply").select("cuda-graphs").run()
    ui_ok(at)
    assert any("Assumed: cuda-graphs: graph launch" in c.value for c in at.caption)
    with ctda.open_store(str(page_store)) as session:
        sc = session.whatif(MINITOY, apply=["cuda-graphs"], save=False)
    expected = float(sc.step_times().predicted_ns.mean()) / 1e6
    shown = float(at.metric[1].value.split()[0])
    assert shown == pytest.approx(expected, abs=0.002)


# --- the pairs recorded for the benchmark (bench/traces/gpu; no corpus needed) ----------------

BENCH_GPU = Path(__file__).resolve().parents[1] / "bench" / "traces" / "gpu"


def test_the_suite_finds_every_pair_that_states_its_scenario(tmp_path: Path) -> None:
    from bench.suite_accuracy import local_gpu_pairs

    found = {p.before: (p.apply, p.goal) for p in local_gpu_pairs(BENCH_GPU)}
    assert found["bench:gpu/v5_cuda_graph_l16_before.pt.trace.json.gz"] == (("cuda-graphs",), 0.10)
    assert found["bench:gpu/v6_amp_d8192_before.pt.trace.json.gz"] == (("bf16",), 0.20)
    (tmp_path / "x_before.steps.json").write_text(
        json.dumps({"scenario": "--scale 'name~k=0.5' --apply no-sync:log", "apply": "bf16"})
    )
    (tmp_path / "y_before.steps.json").write_text(json.dumps({"median_active_ms": 1.0}))  # no scenario
    [pair] = local_gpu_pairs(tmp_path)
    assert pair.scale == ("name~k=0.5",) and pair.apply == ("no-sync:log", "bf16")
    assert pair.after == "bench:gpu/x_after.pt.trace.json.gz" and pair.goal == 0.10


@pytest.mark.parametrize("stem", ["v5_cuda_graph_l16", "v6_amp_d8192", "v7_conv_amp", "v8_log_sync"])
def test_held_out_gpu_pairs(stem: str) -> None:
    """Shapes the models were not written against (recorded on an H200 after they were)."""
    before = json.loads((BENCH_GPU / f"{stem}_before.steps.json").read_text())
    after = json.loads((BENCH_GPU / f"{stem}_after.steps.json").read_text())
    a = analyze(read_trace(BENCH_GPU / f"{stem}_before.pt.trace.json.gz"))
    sc = run(a, [], effects=opt.apply(a, before["apply"]))
    predicted = float(np.median(sc.step_times().predicted_ns)) / 1e6
    assert abs(predicted / after["median_active_ms"] - 1) <= before["goal"], predicted


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
