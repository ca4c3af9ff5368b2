"""Normalised event kinds: one enum over the category names of every Kineto vintage."""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import numpy.typing as npt


class Kind(IntEnum):
    """What an event is, independent of how its trace spelled the category."""

    OTHER = 0  # an X event of a category we do not interpret (kept, counted as a warning)
    CPU_OP = 1
    USER_ANNOTATION = 2
    PYTHON = 3
    RUNTIME = 4
    DRIVER = 5
    KERNEL = 6
    MEMCPY = 7
    MEMSET = 8
    SYNC = 9  # GPU-side cuda_sync records (Context/Stream/Event Sync, Stream Wait Event)
    GPU_ANNOTATION = 10
    TRACE_SPAN = 11  # the profiler's own "PyTorch Profiler (N)" span
    PROFILER_RANGE = 12
    METADATA = 13
    INSTANT = 14
    COUNTER = 15
    FLOW = 16


CATEGORY_KIND: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "Operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "Runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.DRIVER,
    "kernel": Kind.KERNEL,
    "Kernel": Kind.KERNEL,
    "mtia_ccp_events": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "Memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "Trace": Kind.TRACE_SPAN,
    "cuda_profiler_range": Kind.PROFILER_RANGE,
}

PHASE_KIND: dict[str, Kind] = {
    "M": Kind.METADATA,
    "i": Kind.INSTANT,
    "I": Kind.INSTANT,
    "C": Kind.COUNTER,
    "s": Kind.FLOW,
    "t": Kind.FLOW,
    "f": Kind.FLOW,
}

CPU_KINDS = frozenset({Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON, Kind.RUNTIME, Kind.DRIVER})
GPU_KINDS = frozenset(
    {Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.SYNC, Kind.GPU_ANNOTATION, Kind.PROFILER_RANGE}
)
GPU_WORK_KINDS = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET})


def kind_of(ph: str, cat: str) -> Kind:
    """Kind of one (phase, category) pair; complete events are classified by category."""
    if ph == "X":
        return CATEGORY_KIND.get(cat, Kind.OTHER)
    return PHASE_KIND.get(ph, Kind.OTHER)


def kind_lut(ph_values: list[str], cat_values: list[str]) -> npt.NDArray[np.int8]:
    """Kind of every (ph code, cat code) pair of two dictionaries, as a 2-D lookup table."""
    lut = np.zeros((max(len(ph_values), 1), max(len(cat_values), 1)), dtype=np.int8)
    for i, ph in enumerate(ph_values):
        for j, cat in enumerate(cat_values):
            lut[i, j] = kind_of(ph or "", cat or "")
    return lut


def in_kinds(kinds: npt.NDArray[np.int8], members: frozenset[Kind]) -> npt.NDArray[np.bool_]:
    """Vectorised membership test of a kind column (a table lookup: no sort, no temporaries)."""
    lut = np.zeros(max(Kind) + 1, dtype=np.bool_)
    lut[[int(k) for k in members]] = True
    return lut[kinds]
