"""Matching keys read from the trace: process group, sequence number and size on NCCL kernels
(as newer PyTorch records them), on a small job written here: three ranks, one of which was
profiled from a later collective on and recorded a different size for one of them."""

from __future__ import annotations

import json
from pathlib import Path

from ctda.job.run import analyze_job


def write_rank(path: Path, rank: int, seqs: list[int], sizes: dict[int, int]) -> None:
    events: list[dict[str, object]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": 1000,
            "dur": 900,
        },
    ]
    for k, seq in enumerate(seqs):
        t = 1100 + 200 * k
        corr = 10 + k
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 10,
                "args": {"correlation": corr},
            }
        )
        # the last rank to arrive is rank 2 (later start), everyone completes together
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                "pid": 0,
                "tid": 7,
                "ts": t + 20 + 10 * rank,
                "dur": 120 - 10 * rank,
                "args": {
                    "device": 0,
                    "stream": 7,
                    "correlation": corr,
                    "Seq": seq,
                    "Process Group Name": "0",
                    "In msg nelems": sizes.get(seq, 1024),
                },
            }
        )
    doc = {
        "distributedInfo": {"rank": rank, "world_size": 3, "backend": "nccl"},
        "host_name": "node1",
        "traceEvents": events,
    }
    path.write_text(json.dumps(doc))


def test_sequence_numbers_and_sizes_on_nccl_kernels(tmp_path: Path) -> None:
    write_rank(tmp_path / "rank0.json", 0, [1, 2, 3], {})
    write_rank(tmp_path / "rank1.json", 1, [2, 3, 4], {3: 2048})  # starts later; disagrees on #3
    write_rank(tmp_path / "rank2.json", 2, [1, 2, 3], {})
    job = analyze_job([tmp_path], executor="serial")
    m = job.matching
    assert m.method == {"0": "seq"}
    assert m.inconsistent == {0: 0, 1: 1, 2: 0}  # rank 1's size for #3
    assert m.unmatched == {0: 0, 1: 1, 2: 0}  # #4 only rank 1 recorded
    by = m.parts.groupby("cid")["rank"].apply(list).tolist()
    assert by == [[0, 2], [0, 1, 2], [0, 2]]  # collectives #1, #2, #3
    assert set(m.parts["size"]) == {1024}
    assert job.full().replay_exact()
    assert (job.paths.groupby("label").ns.sum() == job.steps.set_index("label").job_step_ns).all()
    # rank 2 arrives last at every collective
    assert list(job.stragglers.straggler) == [2]
