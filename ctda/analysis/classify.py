"""Bound-by classes: what kind of work or wait each analysed event and gap stands for."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.analysis.rules.context import RuleContext
from ctda.ingest.kinds import Kind
from ctda.kernels import kernel

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
    return inherit_down(flag, parent, depth)


def inherit_down(
    flag: npt.NDArray[np.bool_], parent: npt.NDArray[np.int64], depth: npt.NDArray[np.int16]
) -> npt.NDArray[np.bool_]:
    """``flag`` or-ed down the nesting: level by level (depth 1, 2, ...), each event with a
    parent takes its parent's value as it stood after the previous level."""
    return _inherit_levels(
        np.asarray(flag, dtype=np.bool_),
        np.asarray(parent, dtype=np.int64),
        np.asarray(depth, dtype=np.int64),
    )


@kernel
def _inherit_levels(flag, parent, depth):  # type: ignore[no-untyped-def]  # pragma: no cover
    n = flag.shape[0]
    out = flag.copy()
    top = 0
    for i in range(n):
        top = max(top, depth[i])
    # events with a parent, bucketed by depth (counting sort, original order within a level)
    ptr = np.zeros(top + 2, dtype=np.int64)
    for i in range(n):
        if depth[i] >= 1 and parent[i] >= 0:
            ptr[depth[i] + 1] += 1
    for d in range(1, top + 2):
        ptr[d] += ptr[d - 1]
    at = np.empty(ptr[top + 1], dtype=np.int64)
    fill = ptr.copy()
    for i in range(n):
        if depth[i] >= 1 and parent[i] >= 0:
            at[fill[depth[i]]] = i
            fill[depth[i]] += 1
    got = np.empty(at.shape[0], dtype=np.bool_)
    for d in range(1, top + 1):
        for k in range(ptr[d], ptr[d + 1]):  # read the whole level first, then write
            got[k] = out[parent[at[k]]]
        for k in range(ptr[d], ptr[d + 1]):
            if got[k]:
                out[at[k]] = True
    return out


def event_classes(ctx: RuleContext) -> npt.NDArray[np.int8]:
    """Class code of every analysed event (what its own time is spent on)."""
    n = ctx.nodes
    cls = np.full(n.n, CLASS_CODE["cpu"], dtype=np.int8)
    comm = ctx.name_mask(COMM_RE)
    data = _inherit(ctx.name_mask(DATA_RE) & ~n.is_gpu, n.parent, n.depth)
    # an annotation's own time is time its thread spent in no recorded op
    cls[n.kind == Kind.USER_ANNOTATION] = CLASS_CODE["cpu_gap"]
    cls[data] = CLASS_CODE["data_loading"]
    cls[comm & ~n.is_gpu] = CLASS_CODE["communication"]
    runtime = (n.kind == Kind.RUNTIME) | (n.kind == Kind.DRIVER)
    cls[runtime & ctx.name_mask(LAUNCH_RE)] = CLASS_CODE["launch_overhead"]
    cls[runtime & ctx.name_mask(SYNC_RE)] = CLASS_CODE["sync_wait"]
    cls[n.kind == Kind.KERNEL] = CLASS_CODE["gpu_compute"]
    cls[(n.kind == Kind.KERNEL) & comm] = CLASS_CODE["gpu_comm"]
    cls[(n.kind == Kind.MEMCPY) | (n.kind == Kind.MEMSET)] = CLASS_CODE["gpu_memcpy"]
    return cls
