"""The reader over every real trace of the shared corpus, checked against MANIFEST.tsv.

The manifest's counts come from the raw JSON (see its README for the definitions); here
they are recomputed from the EventTable's columns, so a match means no event was lost,
duplicated or misclassified on the way in.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ctda.ingest.kinds import Kind
from ctda.ingest.reader import read_trace
from ctda.ingest.summary import BLOCKING_CALLS, summarize
from ctda.ingest.table import EventTable
from tests.conftest import CORPUS, SKIP_CORPUS, corpus_table, manifest_rows

MANIFEST_CPU_CATS = {
    "cpu_op",
    "user_annotation",
    "python_function",
    "cuda_runtime",
    "cuda_driver",
    "Operator",
    "Runtime",
    "mtia_runtime",
}
MANIFEST_GPU_CATS = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_sync",
    "gpu_user_annotation",
    "Kernel",
    "Memcpy",
    "Memset",
    "mtia_ccp_events",
}
STEP = re.compile(r"^ProfilerStep#\d+$")
COUNT_COLUMNS = (
    "n_trace_events",
    "n_complete_X_events",
    "n_flow_events",
    "n_cpu_threads",
    "n_gpu_streams",
    "n_ProfilerStep",
)
#: generated/*.pt.trace.json.gz are not in the manifest; their counts, from the raw JSON
GENERATED = {
    "a1_cnn_loader_w2": (13020, 12574, 432, 3, 3),
    "b1_gpt_1layer": (7525, 7263, 252, 1, 3),
    "e_cnn_bgthread_before": (63020, 62576, 432, 2, 3),
    "f_cnn_bgthread_after": (64749, 64305, 432, 2, 3),
}


def _is_negative_int(label: str) -> bool:
    try:
        return int(label) < 0
    except ValueError:
        return False


def manifest_counts(table: EventTable) -> dict[str, float]:
    """The manifest's metrics, by its own definitions, from the table's columns."""
    ph, cat, name = table.decoded("ph"), table.decoded("cat"), table.decoded("name")
    pid, tid = table.decoded("pid"), table.decoded("tid")
    x = ph == "X"
    cpu = x & np.isin(cat, sorted(MANIFEST_CPU_CATS))
    # the manifest leaves out the "Device 0" row (integer tid < 0) that holds Context Sync
    negative_tid = np.array([_is_negative_int(t) for t in table.strings("tid")] or [False])[table.col("tid")]
    gpu = x & np.isin(cat, sorted(MANIFEST_GPU_CATS)) & ~negative_tid
    spanned = x & (cat != "Trace")
    ts, end = table.col("ts_ns")[spanned], (table.col("ts_ns") + table.col("dur_ns"))[spanned]
    return {
        "n_trace_events": len(table),
        "n_complete_X_events": int(x.sum()),
        "n_flow_events": int(np.isin(ph, ["s", "f", "t"]).sum()),
        "n_cpu_threads": len(set(zip(pid[cpu], tid[cpu], strict=True))),
        "n_gpu_streams": len(set(zip(pid[gpu], tid[gpu], strict=True))),
        "n_ProfilerStep": sum(1 for n in name[cpu] if STEP.match(n)),
        "time_span_ms": (int(end.max()) - int(ts.min())) / 1e6,
    }


def check_lanes(table: EventTable, n_cpu_threads: int, n_gpu_streams: int) -> None:
    """ctda's lanes against the manifest's thread/stream counts, differences explained.

    * CPU lanes also hold complete events of unknown categories (kept, not dropped), so
      their threads count too.
    * GPU lanes are keyed by (device, stream) from args, not by the pid/tid row. The
      device-wide lane (stream -1, Context Sync records) is a lane of its own where the
      manifest leaves it out, and cuda_profiler_range events get a lane though the
      manifest does not count that category.
    """
    lanes, lane, kind = table.lanes, table.col("lane"), table.col("kind")
    is_gpu = lanes.is_gpu.astype(bool).to_numpy()
    unknown = np.flatnonzero((kind == Kind.OTHER) & (lane >= 0))
    unknown_only = set(lane[unknown].tolist()) - set(lane[(kind != Kind.OTHER) & (lane >= 0)].tolist())
    assert int((~is_gpu).sum()) - len(unknown_only) == n_cpu_threads
    gpu_lanes = lanes[is_gpu]
    ranges_only = set(lane[kind == Kind.PROFILER_RANGE].tolist()) - set(
        lane[(kind != Kind.PROFILER_RANGE) & (lane >= 0)].tolist()
    )
    extra = int((gpu_lanes.stream < 0).sum()) + len(ranges_only - set(gpu_lanes.lane[gpu_lanes.stream < 0]))
    assert len(gpu_lanes) - extra == n_gpu_streams
    assert int(lanes.n_events.sum()) == int(np.sum(lane >= 0))


def _rows() -> list[dict[str, str]]:
    return manifest_rows() or [{"path": "absent"}]


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["path"])
def test_manifest_counts(row: dict[str, str]) -> None:
    assert CORPUS is not None
    table = corpus_table(CORPUS / row["path"])
    got = manifest_counts(table)
    for col in COUNT_COLUMNS:
        assert got[col] == int(row[col]), col
    assert got["time_span_ms"] == pytest.approx(float(row["time_span_ms"]), abs=1.5e-3)
    check_lanes(table, int(row["n_cpu_threads"]), int(row["n_gpu_streams"]))
    steps = table.col("step")
    assert len(set(steps[steps >= 0].tolist())) == int(row["n_ProfilerStep"])


def _generated() -> list[Path]:
    return sorted((CORPUS / "generated").glob("*.pt.trace.json.gz")) if CORPUS else [Path("absent")]


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("path", _generated(), ids=lambda p: p.name)
def test_generated_traces(path: Path) -> None:
    expected = GENERATED[path.name.split(".")[0]]
    table = corpus_table(path)
    got = manifest_counts(table)
    keys = ("n_trace_events", "n_complete_X_events", "n_flow_events", "n_cpu_threads", "n_ProfilerStep")
    assert tuple(got[k] for k in keys) == expected
    assert got["n_gpu_streams"] == 0
    assert len(table.lanes) == expected[3]  # CPU-only: every lane is a thread


BIG = ["tracelens/rocm_xdit_sd3.5_inference.json.gz", "hta/resnet_ddp_ws1_v100_ns_timestamps.json.gz"]


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("name", BIG)
def test_parallel_decode_equals_serial(name: str) -> None:
    assert CORPUS is not None
    serial = read_trace(CORPUS / name, parallel=False)
    parallel = read_trace(CORPUS / name, parallel=True)
    assert parallel.events.equals(serial.events)
    assert parallel.lanes.equals(serial.lanes)
    assert parallel.flows.equals(serial.flows)
    assert parallel.meta == serial.meta


@SKIP_CORPUS
@pytest.mark.corpus
def test_epoch_float_timestamps_are_exact() -> None:
    """µs floats with ns decimals at epoch scale (~1.7e15) do not fit float64; they are reparsed."""
    assert CORPUS is not None
    table = read_trace(CORPUS / "hta/resnet_ddp_ws1_v100_ns_timestamps.json.gz")
    # the first event is written as "ts": 1712195495519689.047, "dur": 63.813
    assert table.col("ts_ns")[0] == 1712195495519689047
    assert table.col("dur_ns")[0] == 63813


def _manifest_sync(text: str) -> dict[str, int]:
    """Parse e.g. "yes: cudaStreamWaitEvent*34,cuda_sync:Stream Sync*16" into ctda's spelling."""
    if not text.startswith("yes:"):
        return {}
    out = {}
    for item in text[4:].split(","):
        name, _, n = item.strip().rpartition("*")
        out[name.replace("cuda_sync:", "cuda_sync: ")] = int(n)
    return out


@SKIP_CORPUS
@pytest.mark.corpus
@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["path"])
def test_inspect_summary_matches_manifest(row: dict[str, str]) -> None:
    assert CORPUS is not None
    summary = summarize(corpus_table(CORPUS / row["path"]))
    assert len(summary.steps) == int(row["n_ProfilerStep"])
    assert summary.span_ms == pytest.approx(float(row["time_span_ms"]), abs=1.5e-3)
    # sync: every blocking call and cuda_sync kind ctda reports (the manifest lists
    # non-blocking calls such as cudaEventRecord too, and no hip* names)
    expected = _manifest_sync(row["has_cuda_sync"])
    for name, count in summary.sync.items():
        if not name.startswith("hip"):
            assert expected.get(name) == count, name
    for name, count in expected.items():
        if name in BLOCKING_CALLS or name.startswith("cuda_sync: "):
            assert summary.sync.get(name) == count, name
    # NCCL kernels and CPU-side collectives: "yes: gpu_kernels=80 [...] cpu=320 [...]"
    nccl = re.match(r"yes: gpu_kernels=(\d+) \[.*\] cpu=(\d+)", row["has_nccl"])
    kernels, collectives = (int(nccl[1]), int(nccl[2])) if nccl else (0, 0)
    assert sum(summary.nccl_kernels.values()) == kernels
    assert sum(summary.collective_ops.values()) == collectives
    # distributedInfo: "backend=nccl,rank=0,world_size=16" or "none"
    rank = re.search(r"\brank=(\d+)", row["distributedInfo"])
    world = re.search(r"\bworld_size=(\d+)", row["distributedInfo"])
    assert summary.rank == (int(rank[1]) if rank else None)
    assert summary.world_size == (int(world[1]) if world else None)
