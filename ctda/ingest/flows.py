"""Flow events (ph s/t/f) bound to the complete events they connect, and paired by id."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.ingest.kinds import Kind
from ctda.ingest.npx import factorize, first_of_each, unique
from ctda.ingest.table import EventTable
from ctda.ingest.timestamps import NA

I64 = npt.NDArray[np.int64]
FLOW_COLUMNS = ["cat", "flow_id", "src_uid", "dst_uid"]


def bind_flows(table: EventTable) -> pd.DataFrame:
    """Pair flow events into (cat, flow_id, src_uid, dst_uid) rows bound to complete events.

    ``cat`` is the code of the flow's category in the events' ``cat`` dictionary. A flow
    point binds to the complete event on the same pid/tid that starts at the same
    timestamp; when several do, to the innermost: the shortest (on equal durations the
    later in the file, as the stack walk nests it, or for zero durations, which do not
    nest, the first). One start may have many finishes
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
    """uid of the innermost complete event with the flow point's pid, tid and ts; else -1.

    Innermost is decided by duration, not by the ``depth`` column, so flows can be bound
    while the call stacks are still being rebuilt.
    """
    slices = np.flatnonzero(table.col("lane") >= 0)
    if len(slices) == 0:
        return np.full(len(flows), -1, dtype=np.int64)
    key = _thread_time_keys(table, slices, flows)
    cand_key, point_key = key[: len(slices)], key[len(slices) :]
    order = np.argsort(cand_key, kind="stable")
    cand_key, cand_uid = cand_key[order], slices[order]
    # several slices starting together on a thread: the innermost one goes first
    tie = np.zeros(len(cand_key), dtype=np.bool_)
    tie[1:] = cand_key[1:] == cand_key[:-1]
    if tie.any():
        tie[:-1] |= tie[1:]
        rows = np.flatnonzero(tie)
        uid = cand_uid[rows]
        dur = np.maximum(table.col("dur_ns")[uid], 0)
        # equal positive durations nest (the later is inside), equal zero ones are siblings
        cand_uid[rows] = uid[np.lexsort((np.where(dur > 0, -uid, uid), dur, cand_key[rows]))]
    first = np.ones(len(cand_key), dtype=np.bool_)
    first[1:] = cand_key[1:] != cand_key[:-1]
    cand_key, cand_uid = cand_key[first], cand_uid[first]
    pos = np.clip(np.searchsorted(cand_key, point_key), 0, len(cand_key) - 1)
    return np.where(cand_key[pos] == point_key, cand_uid[pos], -1).astype(np.int64)


def _thread_time_keys(table: EventTable, slices: I64, flows: I64) -> I64:
    """One int64 per row of ``slices`` then ``flows``, equal iff (pid, tid, ts) are.

    Usually the thread code and the time since the first event fit one int64 together;
    otherwise the timestamps are replaced by their ranks first (a sort of them all).
    Flow points without a timestamp get -1, which matches no slice.
    """
    rows = np.concatenate([slices, flows])
    n_tid = int(table.col("tid").max()) + 1
    thread = table.col("pid")[rows].astype(np.int64) * n_tid + table.col("tid")[rows]
    ts = table.col("ts_ns")[rows]
    valid = ts != NA
    since = np.where(valid, ts - ts[valid].min(), 0)
    span_bits = int(since.max()).bit_length()
    if span_bits + int(thread.max()).bit_length() <= 62:
        key = (thread << span_bits) | since
    else:
        times = unique(ts[valid])
        key = thread * len(times) + np.searchsorted(times, ts)
    return np.where(valid, key, -1)
