"""The what-if page's one-line "why the classes moved", on real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ctda.analysis.engine import AnalysisOptions, analyze
from ctda.ingest.reader import read_trace
from ctda.ui import explain, frames
from ctda.whatif.scenario import run
from ctda.whatif.select import parse_scale
from tests.conftest import CORPUS, SKIP_CORPUS

MINITOY = Path(__file__).parent / "data" / "hta" / "rocm62_mi250_minitoy_train.json.gz"


def line(trace: Path, spec: str) -> tuple[str | None, object, object]:
    a = analyze(read_trace(trace), AnalysisOptions())
    sc = run(a, [parse_scale(a, spec)], name="x")
    before, after = explain.lane_shares(a), explain.lane_shares(sc.analysis)
    why = explain.reshuffle(frames.by_class(a), frames.by_class(sc.analysis), lambda: before, lambda: after)
    return why, before, after


@SKIP_CORPUS
def test_faster_kernels_move_the_path_to_the_nccl_stream() -> None:
    # halving the GPU kernels of this DDP run moves most of the path from the compute
    # stream to the NCCL stream, whose SendRecv waits for the compute stream through
    # cudaStreamWaitEvent (linked by the stream_wait_inferred rule): communication grows
    assert CORPUS is not None
    why, before, after = line(
        CORPUS / "hta" / "trace_diff_ws2_rank1_dataloader.json.gz", "class=gpu_compute=0.5"
    )
    assert why == (
        "Why: the critical path moved from GPU 1 stream 7 (59% of it) to GPU 1 stream 15 (31%), "
        "so gpu_comm grew 127.757 → 164.004 ms."
    )
    assert float(np.sum(before)) == pytest.approx(1.0) and float(np.sum(after)) == pytest.approx(1.0)


def test_nothing_to_explain_when_no_class_grows() -> None:
    why, before, after = line(MINITOY, "class=gpu_compute=0.5")
    assert why is None
    # the path runs 81% on the autograd thread, before and after
    assert before.index[0] == after.index[0] == "thread 598009 (pt_autograd_0)"
    assert before.iloc[0] == pytest.approx(0.8144, abs=1e-4)
