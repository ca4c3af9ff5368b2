"""The synthetic launch-bound step and the helpers that the named-optimisation tests
(``tests/test_optimisations*.py``) share: a trace written from events, its analysis, and
the step time predicted with some optimisations applied (times in µs, as in ``synth``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctda.analysis.engine import Analysis, analyze
from ctda.ingest.reader import read_trace
from ctda.whatif import optimisations as opt
from ctda.whatif.scenario import run
from tests import synth

US = 1_000


def _trace(tmp_path: Path, events: list[dict[str, Any]], name: str = "t.json", **top: Any) -> Path:
    return synth.write(tmp_path / name, events, **top)


def _a(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> Analysis:
    return analyze(read_trace(_trace(tmp_path, events, **top)))


def _step_ns(a: Analysis, *specs: str) -> int:
    sc = run(a, [], effects=opt.apply(a, specs))
    return int(sc.step_times().predicted_ns.iloc[0])


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
