"""Flow events (ph s/t/f) bound to the complete events they connect, and paired by id."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.ingest.kinds import Kind
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]
FLOW_COLUMNS = ["cat", "flow_id", "src_uid", "dst_uid"]


def bind_flows(table: EventTable) -> pd.DataFrame:
    """Pair flow events into (cat, flow_id, src_uid, dst_uid) rows bound to complete events.

    ``cat`` is the code of the flow's category in the events' ``cat`` dictionary. A flow
    point binds to the complete event on the same pid/tid that starts at the same
    timestamp (the innermost one when several do). One start may have many finishes
    (cudaGraphLaunch): one row per finish. An unmatched side is -1: lone ``f`` events
    occur in real traces, and a start without finish gets a row of its own.
    """
    flows = np.flatnonzero(table.col("kind") == Kind.FLOW)
    if len(flows) == 0:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in FLOW_COLUMNS})
    uid = bind_points(table, flows)
    is_start, group = flow_groups(table, flows)
    cat, fid = table.col("cat")[flows].astype(np.int64), table.col("flow_id")[flows]
    starts = np.flatnonzero(is_start)
    # a reused id keeps its first start; the later ones are counted in the warnings
    groups, first = np.unique(group[starts], return_index=True)
    src_of_group = uid[starts[first]]
    ends = np.flatnonzero(~is_start)
    pos = np.clip(np.searchsorted(groups, group[ends]), 0, max(len(groups) - 1, 0))
    matched = (groups[pos] == group[ends]) if len(groups) else np.zeros(len(ends), dtype=np.bool_)
    src = np.where(matched, src_of_group[pos] if len(groups) else -1, -1)
    lonely = starts[first][~np.isin(groups, group[ends])]
    return pd.DataFrame(
        {
            "cat": np.concatenate([cat[ends], cat[lonely]]),
            "flow_id": np.concatenate([fid[ends], fid[lonely]]),
            "src_uid": np.concatenate([src, uid[lonely]]).astype(np.int64),
            "dst_uid": np.concatenate([uid[ends], np.full(len(lonely), -1)]).astype(np.int64),
        }
    )


def flow_groups(table: EventTable, flows: I64) -> tuple[npt.NDArray[np.bool_], I64]:
    """Whether each flow row is a start (``s``), and a code for its (cat, id) pair."""
    is_start = (table.strings("ph") == "s")[table.col("ph")[flows]]
    ids, id_code = np.unique(table.col("flow_id")[flows], return_inverse=True)
    return is_start, table.col("cat")[flows].astype(np.int64) * len(ids) + id_code


def bind_points(table: EventTable, flows: I64) -> I64:
    """uid of the deepest complete event with the flow point's pid, tid and ts; else -1."""
    slices = np.flatnonzero(table.col("lane") >= 0)
    if len(slices) == 0:
        return np.full(len(flows), -1, dtype=np.int64)
    pid, tid, ts = table.col("pid").astype(np.int64), table.col("tid").astype(np.int64), table.col("ts_ns")
    ntid = int(tid.max()) + 1
    # ranks of the timestamps make one int64 key of (pid, tid, ts) without overflow
    times = np.unique(np.concatenate([ts[slices], ts[flows]]))

    def key(rows: I64) -> I64:
        return (pid[rows] * ntid + tid[rows]) * len(times) + np.searchsorted(times, ts[rows])

    cand_key = key(slices)
    order = np.lexsort((-table.col("depth")[slices].astype(np.int64), cand_key))
    cand_key, cand_uid = cand_key[order], slices[order]
    first = np.ones(len(cand_key), dtype=np.bool_)
    first[1:] = cand_key[1:] != cand_key[:-1]
    cand_key, cand_uid = cand_key[first], cand_uid[first]
    point_key = key(flows)
    pos = np.clip(np.searchsorted(cand_key, point_key), 0, len(cand_key) - 1)
    return np.where(cand_key[pos] == point_key, cand_uid[pos], -1).astype(np.int64)
