"""HTA's vocabulary: edge types, the calls it treats specially, options, and its edge list."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


class HtaEdge(IntEnum):
    """HTA's edge types (``CPEdgeType``); ``str(HtaEdge.X)`` is HTA's name for it."""

    OPERATOR = 0
    DEPENDENCY = 1
    KERNEL_LAUNCH_DELAY = 2
    KERNEL_KERNEL_DELAY = 3
    SYNC_DEPENDENCY = 4

    def __str__(self) -> str:
        return HTA_NAMES[self]


HTA_NAMES = {
    HtaEdge.OPERATOR: "critical_path_operator",
    HtaEdge.DEPENDENCY: "critical_path_dependency",
    HtaEdge.KERNEL_LAUNCH_DELAY: "critical_path_kernel_launch_delay",
    HtaEdge.KERNEL_KERNEL_DELAY: "critical_path_kernel_kernel_delay",
    HtaEdge.SYNC_DEPENDENCY: "critical_path_sync_dependency",
}

#: HTA's ``BLOCKING_SYNC_CALLS``: the edge into their end weighs 0 (exact names)
BLOCKING_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventQuery",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
    }
)
#: HTA's kernel/copy launching calls (queue length, event record/wait matching)
LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
        "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
        "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream",
    }
)  # fmt: skip
#: calls that take the CUDA runtime lock (HTA after 0.5.0)
RUNTIME_LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})

GRAPH_CPU_KINDS = frozenset({Kind.CPU_OP, Kind.RUNTIME, Kind.DRIVER})
GPU_WORK = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET})


@dataclass(frozen=True)
class HtaOptions:
    """Which HTA to reproduce, and over which window.

    The defaults reproduce current HTA (the version that wrote the overlaid trace in
    ``tests/data/hta``). :meth:`release_0_5` gives the 0.5.0 release's rules.
    """

    #: HTA's ``annotation``: substring of event names bounding the window; "" = whole trace
    annotation: str = ""
    #: HTA's ``instance_id``: which match(es), by position in file order, inclusive range
    instance: int | tuple[int, int] = 0
    #: chain CUDA-runtime-lock calls across threads (HTA after 0.5.0)
    runtime_lock: bool = True
    #: walk the autograd thread's events as part of the forward thread (HTA after 0.5.0)
    merge_backward_thread: bool = True
    #: HTA's CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE: a 0-weight launch edge when the
    #: launch delay edge was not added (off by default in HTA)
    zero_weight_launch_edges: bool = False
    #: newer HTA (KERNEL_KERNEL_DELAY_THRESHOLD_US): no kernel-kernel edge across a
    #: longer stream gap (something unrecorded held the stream); None = no limit (0.5.0)
    kernel_kernel_threshold_ns: int | None = 1_500_000
    #: ``TraceAnalysis(include_last_profiler_step=...)``: by default HTA drops the last
    #: ProfilerStep of a trace with two or more
    include_last_profiler_step: bool = False

    @classmethod
    def release_0_5(cls, **kw: Any) -> HtaOptions:
        """The rules of the HolisticTraceAnalysis 0.5.0 release (no cross-thread edges)."""
        return cls(runtime_lock=False, merge_backward_thread=False, kernel_kernel_threshold_ns=None, **kw)


DEFAULT_OPTIONS = HtaOptions()


@dataclass
class HtaEdges:
    """HTA's edges over ctda node ids, in HTA's insertion order (which decides ties)."""

    src: I64
    dst: I64
    htype: npt.NDArray[np.int8]  # HtaEdge code
    weight: I64  # HTA's weight in ns (observed gap, or 0), never negative
    attributed: I64  # analysed event HTA charges the edge to (operator, kernel-kernel), else -1
    cross_thread: B  # lock-rule dependency between threads
    events: I64  # analysed indices of the events HTA's graph has nodes for
    time: I64  # per ctda node: its time as HTA sees it (ns)
    negative_clamped: int = 0  # edges HTA would weigh negative (timestamp skew), set to 0

    def __len__(self) -> int:
        return len(self.src)


Part = tuple[
    I64, I64, npt.NDArray[np.int8], B, I64, B
]  # src, dst, type, zero weight, attributed, cross-thread


def empty_part() -> Part:
    z = np.zeros(0, dtype=np.int64)
    return z, z, np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool), z, np.zeros(0, dtype=bool)
