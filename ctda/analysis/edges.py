"""Edge types, their intrinsic latencies (floors) and the classes their time is charged to.

Every edge belongs to one type. The type decides two things: the floor used when the edge
is not binding (its weight is then ``min(observed gap, floor)``), and how time spent on the
edge is charged when it lies on the critical path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

US = 1_000  # ns per microsecond


class EdgeType(IntEnum):
    """Dependency edge families (docs/model.md#edge-families)."""

    DURATION = 0  # an event's start -> its end, with nothing recorded inside
    SEGMENT = 1  # a slice of an enclosing event's self time between two nested boundaries
    THREAD_SEQ = 2  # a CPU thread between events: nothing recorded was running
    STREAM_SEQ = 3  # consecutive work on one GPU stream
    LAUNCH = 4  # runtime call -> the device work it enqueued
    SYNC = 5  # device work end -> end of the CPU call that waited for it
    STREAM_WAIT = 6  # GPU -> GPU ordering through cudaStreamWaitEvent
    CROSS_THREAD = 7  # one CPU thread waiting for another (fwdbwd, join, GIL, lock)
    RELEASE = 8  # SOURCE -> a node nothing else explains (its observed release time)
    TERMINAL = 9  # a node -> SINK
    CROSS_RANK = 10  # a rank's arrival at a collective -> its completion on another rank (jobs)


@dataclass(frozen=True)
class EdgeSpec:
    """Static facts about one edge type."""

    name: str
    floor_ns: int  # intrinsic latency: the most a non-binding edge may weigh
    charge: str  # "event" (the event the edge belongs to) or a gap class name


SPECS: dict[EdgeType, EdgeSpec] = {
    # a waiting call's own overhead when its wait, not its work, bound it
    EdgeType.DURATION: EdgeSpec("duration", 2 * US, "event"),
    EdgeType.SEGMENT: EdgeSpec("nesting", 0, "event"),
    EdgeType.THREAD_SEQ: EdgeSpec("sequence", 0, "cpu_gap"),
    EdgeType.STREAM_SEQ: EdgeSpec("sequence", 0, "gpu_gap"),
    # the GPU front-end needs a few microseconds to pick up queued work
    EdgeType.LAUNCH: EdgeSpec("launch", 3 * US, "launch_overhead"),
    # the analyses (a trace's, a job's) replace it per call kind with the return latency
    # measured in the trace (ctda.analysis.sync_latency)
    EdgeType.SYNC: EdgeSpec("sync", 1 * US, "sync_wait"),
    EdgeType.STREAM_WAIT: EdgeSpec("sync", 1 * US, "sync_wait"),
    EdgeType.CROSS_THREAD: EdgeSpec("cross-thread", 0, "cross_thread"),
    EdgeType.RELEASE: EdgeSpec("release", 0, "cpu_gap"),
    EdgeType.TERMINAL: EdgeSpec("terminal", 0, "cpu_gap"),
    # charged to the collective on the completing rank: the transfer after the last arrival
    EdgeType.CROSS_RANK: EdgeSpec("cross-rank", 0, "communication"),
}


def floors() -> npt.NDArray[np.int64]:
    """Floor per edge type code, for vectorised lookups."""
    out = np.zeros(len(EdgeType), dtype=np.int64)
    for t, spec in SPECS.items():
        out[int(t)] = spec.floor_ns
    return out


@dataclass
class EdgeBatch:
    """Edges produced by one rule: node ids, type codes, owners, and the rule's name.

    ``owner`` is the analysed event whose own time the edge is (-1 for waits and gaps).
    ``rule`` is filled in from the registry when the rule runs (see ``rules.registry``).
    """

    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    etype: npt.NDArray[np.int8]
    owner: npt.NDArray[np.int64]
    rule: str

    @classmethod
    def of(
        cls,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        etype: EdgeType | npt.ArrayLike,
        rule: str = "",
        owner: npt.ArrayLike | None = None,
    ) -> EdgeBatch:
        s = np.asarray(src, dtype=np.int64)
        d = np.asarray(dst, dtype=np.int64)
        t = np.asarray(etype, dtype=np.int8)
        if t.ndim == 0:
            t = np.full(len(s), int(t), dtype=np.int8)
        o = np.full(len(s), -1, dtype=np.int64) if owner is None else np.asarray(owner, dtype=np.int64)
        return cls(s, d, t, o, rule)

    def __len__(self) -> int:
        return len(self.src)
