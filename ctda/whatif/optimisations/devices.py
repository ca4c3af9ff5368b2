"""Device peaks for roofline re-timing, and kernel classes told by name.

Peaks are the vendors' dense (no sparsity) figures, TFLOP/s and TB/s. A trace names its
GPU in ``deviceProperties``; a device not in :data:`PEAKS` is re-timed with the H100's
ratios and the answer says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.engine import Analysis
from ctda.analysis.tables import per_name


@dataclass(frozen=True)
class Peaks:
    """Dense peaks of one GPU: FP32 (CUDA cores), TF32 / BF16 / FP16 tensor, memory bandwidth."""

    name: str
    fp32: float  # TFLOP/s
    tf32: float
    bf16: float
    fp16: float
    mem_tbs: float  # TB/s


#: (substring of the lower-cased device name, peaks); the first match wins, so the more
#: specific names come first. V100 and T4 have no BF16 tensor cores: BF16 runs at FP32 speed.
PEAKS: tuple[tuple[str, Peaks], ...] = (
    ("h200", Peaks("H200", 67.0, 494.7, 989.4, 989.4, 4.8)),
    ("h100 pcie", Peaks("H100 PCIe", 51.2, 378.0, 756.0, 756.0, 2.0)),
    ("h100", Peaks("H100 SXM", 67.0, 494.7, 989.4, 989.4, 3.35)),
    ("gh200", Peaks("GH200", 67.0, 494.7, 989.4, 989.4, 4.0)),
    ("a100", Peaks("A100", 19.5, 156.0, 312.0, 312.0, 2.0)),
    ("a10g", Peaks("A10G", 31.2, 62.5, 125.0, 125.0, 0.6)),
    ("a10", Peaks("A10", 31.2, 62.5, 125.0, 125.0, 0.6)),
    ("l40s", Peaks("L40S", 91.6, 183.0, 362.0, 362.0, 0.86)),
    ("l4", Peaks("L4", 30.3, 60.0, 121.0, 121.0, 0.3)),
    ("4090", Peaks("RTX 4090", 82.6, 82.6, 165.2, 165.2, 1.0)),
    ("v100", Peaks("V100", 15.7, 15.7, 15.7, 125.0, 0.9)),
    ("t4", Peaks("T4", 8.1, 8.1, 8.1, 65.0, 0.32)),
    ("mi300", Peaks("MI300X", 163.4, 653.7, 1307.4, 1307.4, 5.3)),
    ("mi250", Peaks("MI250X", 95.7, 95.7, 383.0, 383.0, 3.2)),
)
DEFAULT = "h100"

#: matrix products and convolutions (cuBLAS, cuBLASLt, CUTLASS, cuDNN, rocBLAS, Triton mm)
MATRIX = re.compile(
    r"gemm|cutlass|xmma|nvjet|cublas|cudnn|conv|wgrad|dgrad|fprop|rocblas|hipblas|matmul|_mm_|mm_kernel",
    re.IGNORECASE,
)
#: parts of a matrix product that only move data (split-K reductions)
MATRIX_MEMORY = re.compile(r"splitkreduce|reduce_kernel", re.IGNORECASE)
#: already in half (or narrower) precision: autocast does not change them
HALF = re.compile(r"bf16|f16|fp16|half|hgemm|bfloat16|e4m3|e5m2|fp8|_h_|s16816|h16816", re.IGNORECASE)
TF32 = re.compile(r"tf32|xf32", re.IGNORECASE)


def peaks_of(a: Analysis) -> tuple[Peaks, bool]:
    """The peaks of the trace's first GPU, and whether the table knows it."""
    props = a.table.meta.device_properties or []
    name = str(props[0].get("name", "")) if props else ""
    low = name.lower()
    for key, p in PEAKS:
        if key in low:
            return p, True
    return dict(PEAKS)[DEFAULT], False


def precision(names: npt.NDArray[np.object_]) -> npt.NDArray[np.int8]:
    """Per kernel name: 0 FP32 (CUDA cores), 1 TF32, 2 already half precision."""
    return per_name(names, lambda s: 2 if HALF.search(s) else (1 if TF32.search(s) else 0), np.int8)


def is_matrix(names: npt.NDArray[np.object_]) -> npt.NDArray[np.bool_]:
    """Per kernel name: a compute-bound matrix product or convolution."""
    test = lambda s: int(bool(MATRIX.search(s)) and not MATRIX_MEMORY.search(s))  # noqa: E731
    return per_name(names, test, bool)
