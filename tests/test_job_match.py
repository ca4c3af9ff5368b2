"""Collective matching and clock offsets on small hand-made skeletons (every key and case)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctda.job.match import clock_offsets, match
from ctda.job.segments import Segments
from ctda.job.skeleton import Skeleton, op_key

MS = 1_000_000


def skel(
    rank: int,
    ops: list[str],
    done_ms: list[float],
    host: str | None = "h",
    seq: list[int] | None = None,
    arrive_ms: list[float] | None = None,
) -> Skeleton:
    n = len(ops)
    done = (np.array(done_ms) * MS).astype(np.int64)
    arrive = (np.array(arrive_ms) * MS).astype(np.int64) if arrive_ms is not None else done - MS
    frame = pd.DataFrame(
        {
            "kind": "nccl",
            "op": ops,
            "group": "",
            "seq": seq if seq is not None else [-1] * n,
            "size": -1,
            "event": np.arange(n),
            "issue": -1,
            "t_arrive": arrive,
            "t_done": done,
            "window": 0,
            "cls": 0,
            "name": ops,
        }
    )
    empty = Segments(pd.DataFrame(), {}, 2 * n, 0)
    return Skeleton(rank, host, frame, pd.DataFrame(), 2 * n + 2, empty)


def test_op_keys_agree_across_backends() -> None:
    assert op_key("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)") == "allreduce"
    assert op_key("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "sendrecv"
    assert op_key("gloo:all_reduce") == "allreduce"
    assert op_key("c10d::allreduce_") == "allreduce"
    assert op_key("c10d::alltoall_base_") == "alltoall"
    assert op_key("c10d::allgather_into_tensor_coalesced_") == "allgatherintotensor"


def test_order_matching_aligns_ranks_whose_profiles_start_at_different_collectives() -> None:
    # rank 1's profile starts one collective later and ends one later
    a = skel(0, ["allreduce", "broadcast", "allreduce", "allgather"], [10, 20, 30, 40])
    b = skel(1, ["broadcast", "allreduce", "allgather", "allreduce"], [20.1, 30.2, 40.1, 50.0])
    m = match([a, b])
    assert m.method == {"default": "order"}
    pairs = m.parts.pivot(index="cid", columns="rank", values="row")
    assert pairs.to_numpy().tolist() == [[1, 0], [2, 1], [3, 2]]
    assert m.unmatched == {0: 1, 1: 1}  # each rank's collective the other did not record
    assert m.inconsistent == {0: 0, 1: 0}


def test_sequence_numbers_win_and_disagreeing_ops_are_reported() -> None:
    a = skel(0, ["allreduce", "allreduce", "broadcast"], [10, 20, 30], seq=[7, 8, 9])
    b = skel(1, ["allreduce", "allgather", "broadcast"], [10, 20, 30], seq=[7, 8, 9])
    c = skel(2, ["allreduce", "allreduce", "broadcast"], [10, 20, 30], seq=[7, 8, 9])
    m = match([a, b, c])
    assert m.method == {"default": "seq"}
    assert m.inconsistent == {0: 0, 1: 1, 2: 0}  # rank 1 says allgather where the others say allreduce
    assert m.summary()["by_ranks"] == {2: 1, 3: 2}


def test_clock_offsets_same_host_none_other_host_from_the_collectives() -> None:
    a = skel(0, ["allreduce"] * 3, [10, 20, 30], host="h1", arrive_ms=[9, 19, 29])
    b = skel(1, ["allreduce"] * 3, [10, 20, 30], host="h1", arrive_ms=[8, 18, 28])
    # host h2's clock runs 500 ms ahead: its ranks seem to finish long after rank 0 began
    c = skel(2, ["allreduce"] * 3, [510, 520, 530], host="h2", arrive_ms=[509.5, 519.5, 529.5])
    off = clock_offsets([a, b, c], match([a, b, c]))
    assert off.how == {0: "reference", 1: "same host", 2: "estimated"}
    assert off.offset[0] == off.offset[1] == 0
    # bounds: o >= 9 - 510 = -501 ms and o <= 10 - 509.5 = -499.5 ms: the middle
    assert off.offset[2] == (-501 * MS + -499.5 * MS) // 2
    # a host whose clock agrees needs no correction
    d = skel(3, ["allreduce"] * 3, [10, 20, 30], host="h3", arrive_ms=[9.5, 19.5, 29.5])
    off = clock_offsets([a, d], match([a, d]))
    assert off.offset[3] == 0 and off.how[3] == "consistent"
