"""Bound-by classes: what kind of work or wait each analysed event and gap stands for."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.rules.context import RuleContext
from ctda.ingest.kinds import Kind

CLASSES = (
    "cpu",
    "data_loading",
    "communication",
    "gpu_compute",
    "gpu_comm",
    "gpu_memcpy",
    "launch_overhead",
    "sync_wait",
    "cross_thread",
    "cpu_gap",
    "gpu_gap",
)
CLASS_CODE = {c: i for i, c in enumerate(CLASSES)}

COMM_RE = (
    r"(?i)nccl|rccl|gloo|c10d::|record_param_comms"
    r"|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast"
)
DATA_RE = (
    r"(?i)dataloader|_next_data|_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter"
    r"|fetch\.py|collate|__getitem__"
)
LAUNCH_RE = (
    r"(?i)^(cuda|hip|cu)(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel|GraphLaunch"
    r"|ModuleLaunch|ExtLaunchKernel|ExtModuleLaunchKernel|MemcpyAsync|MemsetAsync|Memcpy2DAsync|MemsetD\d+Async)"
)
SYNC_RE = (
    r"(?i)^(cuda|hip|cu)(DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize"
    r"|StreamWaitEvent|Memcpy|Memset|EventQuery)$"
)


def _inherit(
    flag: npt.NDArray[np.bool_], parent: npt.NDArray[np.int64], depth: npt.NDArray[np.int16]
) -> npt.NDArray[np.bool_]:
    """Propagate a flag from ancestors to descendants, one depth level at a time."""
    out = flag.copy()
    for d in range(1, int(depth.max(initial=0)) + 1):
        at = np.flatnonzero((depth == d) & (parent >= 0))
        out[at] |= out[parent[at]]
    return out


def event_classes(ctx: RuleContext) -> npt.NDArray[np.int8]:
    """Class code of every analysed event (what its own time is spent on)."""
    n = ctx.nodes
    cls = np.full(n.n, CLASS_CODE["cpu"], dtype=np.int8)
    comm = ctx.name_mask(COMM_RE)
    data = _inherit(ctx.name_mask(DATA_RE) & ~n.is_gpu, n.parent, n.depth)
    cls[data] = CLASS_CODE["data_loading"]
    cls[comm & ~n.is_gpu] = CLASS_CODE["communication"]
    runtime = (n.kind == Kind.RUNTIME) | (n.kind == Kind.DRIVER)
    cls[runtime & ctx.name_mask(LAUNCH_RE)] = CLASS_CODE["launch_overhead"]
    cls[runtime & ctx.name_mask(SYNC_RE)] = CLASS_CODE["sync_wait"]
    cls[n.kind == Kind.KERNEL] = CLASS_CODE["gpu_compute"]
    cls[(n.kind == Kind.KERNEL) & comm] = CLASS_CODE["gpu_comm"]
    cls[(n.kind == Kind.MEMCPY) | (n.kind == Kind.MEMSET)] = CLASS_CODE["gpu_memcpy"]
    return cls
