"""The analysed events and their time points (graph nodes).

Event ``i`` (an index into the analysed set, not a trace uid) owns two nodes:
``2*i`` (start) and ``2*i + 1`` (end). SOURCE and SINK come last.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.ingest.columns import NA
from ctda.ingest.kinds import CPU_KINDS, GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]


@dataclass
class Nodes:
    """Columns of the analysed events (index i) and node times (index 2i, 2i+1, SOURCE, SINK)."""

    uid: I64  # trace uid of analysed event i
    ts: I64
    end: I64
    lane: npt.NDArray[np.int32]
    kind: npt.NDArray[np.int8]
    parent: I64  # analysed index of the enclosing event on the same thread, -1 at top level
    depth: npt.NDArray[np.int16]
    is_gpu: npt.NDArray[np.bool_]
    index_of_uid: I64  # trace uid -> analysed index (-1 when not analysed)
    time: I64  # observed time of every node

    @property
    def n(self) -> int:
        return len(self.uid)

    @property
    def source(self) -> int:
        return 2 * self.n

    @property
    def sink(self) -> int:
        return 2 * self.n + 1

    @property
    def n_nodes(self) -> int:
        return 2 * self.n + 2

    def start(self, i: npt.ArrayLike) -> I64:
        return np.asarray(i, dtype=np.int64) * 2

    def finish(self, i: npt.ArrayLike) -> I64:
        return np.asarray(i, dtype=np.int64) * 2 + 1


def select(table: EventTable) -> Nodes:
    """Analysed events: CPU slices on threads and GPU work (kernels, copies, sets) on streams.

    GPU-side annotations and cuda_sync records are not work; they inform rules instead.
    """
    kind = table.col("kind")
    lane = table.col("lane")
    analysed = (lane >= 0) & (in_kinds(kind, CPU_KINDS | GPU_WORK_KINDS) | (kind == Kind.OTHER))
    uid = np.flatnonzero(analysed).astype(np.int64)
    ts = table.col("ts_ns")[uid]
    dur = table.col("dur_ns")[uid]
    end = ts + np.maximum(np.where(dur == NA, 0, dur), 0)
    index_of_uid = np.full(len(table), -1, dtype=np.int64)
    index_of_uid[uid] = np.arange(len(uid))
    parent_uid = table.col("parent")[uid]
    parent = np.where(parent_uid >= 0, index_of_uid[np.maximum(parent_uid, 0)], -1)
    time = np.empty(2 * len(uid) + 2, dtype=np.int64)
    time[0 : 2 * len(uid) : 2] = ts
    time[1 : 2 * len(uid) : 2] = end
    time[-2] = ts.min() if len(ts) else 0
    time[-1] = end.max() if len(end) else 0
    return Nodes(
        uid=uid,
        ts=ts,
        end=end,
        lane=lane[uid].astype(np.int32),
        kind=kind[uid],
        parent=parent.astype(np.int64),
        depth=table.col("depth")[uid],
        is_gpu=in_kinds(kind[uid], GPU_WORK_KINDS),
        index_of_uid=index_of_uid,
        time=time,
    )
