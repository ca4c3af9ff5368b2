"""Flow events (ph s/t/f) bound to the complete events they connect, and paired by id."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.ingest.kinds import Kind
from ctda.ingest.npx import factorize, first_of_each, unique
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
    return flow_table(table)[0]


def flow_table(table: EventTable) -> tuple[pd.DataFrame, dict[str, int]]:
    """:func:`bind_flows`, plus counts of the odd cases for the trace's warnings."""
    flows = np.flatnonzero(table.col("kind") == Kind.FLOW)
    if len(flows) == 0:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in FLOW_COLUMNS}), {}
    uid = _bind_points(table, flows)
    is_start = (table.strings("ph") == "s")[table.col("ph")[flows]]
    cat, fid = table.col("cat")[flows].astype(np.int64), table.col("flow_id")[flows]
    ids, id_code = factorize(fid)
    group = cat * len(ids) + id_code
    starts, ends = np.flatnonzero(is_start), np.flatnonzero(~is_start)
    # a reused id keeps its first start; the later ones are counted in the warnings
    groups, first = first_of_each(group[starts])
    first = starts[first]
    if len(groups):
        pos = np.clip(np.searchsorted(groups, group[ends]), 0, len(groups) - 1)
        matched = groups[pos] == group[ends]
        src = np.where(matched, uid[first[pos]], -1)
    else:
        matched, src = np.zeros(len(ends), dtype=np.bool_), np.full(len(ends), -1)
    lonely = first[~np.isin(groups, group[ends])]
    frame = pd.DataFrame(
        {
            "cat": np.concatenate([cat[ends], cat[lonely]]),
            "flow_id": np.concatenate([fid[ends], fid[lonely]]),
            "src_uid": np.concatenate([src, uid[lonely]]).astype(np.int64),
            "dst_uid": np.concatenate([uid[ends], np.full(len(lonely), -1)]).astype(np.int64),
        }
    )
    odd = {
        "flow finishes with no start (lone 'f')": int(np.sum(~matched)),
        "flow starts reusing the id of an earlier start": len(starts) - len(groups),
        "flow points not bound to any event": int(np.sum(uid < 0)),
    }
    return frame, odd


def _bind_points(table: EventTable, flows: I64) -> I64:
    """uid of the deepest complete event with the flow point's pid, tid and ts; else -1."""
    slices = np.flatnonzero(table.col("lane") >= 0)
    if len(slices) == 0:
        return np.full(len(flows), -1, dtype=np.int64)
    pid, tid, ts = table.col("pid").astype(np.int64), table.col("tid").astype(np.int64), table.col("ts_ns")
    ntid = int(tid.max()) + 1
    # ranks of the timestamps make one int64 key of (pid, tid, ts) without overflow
    times = unique(np.concatenate([ts[slices], ts[flows]]))

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
