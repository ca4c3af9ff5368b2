"""Named optimisations against measured speed-ups: each recorded "before" GPU trace, its
optimisation applied, predicts the median step of its "after" traces within the pair's
bound, for the shared corpus's pairs and the held-out pairs in ``bench/traces/gpu`` (which
the accuracy suite finds by the scenario their sidecars state)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ctda.analysis.engine import analyze
from ctda.ingest.reader import read_trace
from ctda.whatif import optimisations as opt
from ctda.whatif.scenario import run
from tests.conftest import CORPUS, SKIP_CORPUS

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
