"""FLOPs and bytes of matrix operators from their recorded input shapes.

Traces recorded with ``record_shapes=True`` give every operator its ``Input Dims``,
``Input type`` and ``Concrete Inputs`` (the reader keeps them as the ``shapes`` column,
``[dims, types, scalars]`` JSON text). For the operators whose work is a matrix product or
a convolution, this module computes the multiply-adds (as FLOPs, 2 per multiply-add) and
the bytes the operator must at least move (each operand read once, the result written
once, at the recorded element size), evaluated once per distinct (operator, inputs).
Everything else, and operators without shapes, get NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.analysis.engine import Analysis
from ctda.whatif.optimisations import common as c

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Dims = list[list[int]]

#: bytes per element of the dtypes ``Input type`` names (others: unknown)
ELEMENT_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}


def _prod(xs: list[int]) -> int:
    return math.prod(int(x) for x in xs)


def _mm(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    (m, k), (_, n) = d[0], d[1]
    return 2.0 * m * k * n, [d[0], d[1], [m, n]]


def _addmm(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    (m, k), (_, n) = d[1], d[2]
    return 2.0 * m * k * n, [d[0], d[1], d[2], [m, n]]


def _bmm(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    (b, m, k), (_, _, n) = d[0], d[1]
    return 2.0 * b * m * k * n, [d[0], d[1], [b, m, n]]


def _baddbmm(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    (b, m, k), (_, _, n) = d[1], d[2]
    return 2.0 * b * m * k * n, [d[0], d[1], d[2], [b, m, n]]


def _linear(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    x, w = d[0], d[1]
    rows = _prod(x[:-1])
    out = [*x[:-1], w[0]]
    return 2.0 * rows * x[-1] * w[0], [x, w, *(d[2:3] if len(d) > 2 else []), out]


def _matmul(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    a, b = d[0], d[1]
    if len(a) < 2 or len(b) < 2:
        raise ValueError("vector operand")
    batch = _prod(a[:-2]) if len(a) >= len(b) else _prod(b[:-2])
    out = [*(a[:-2] if len(a) >= len(b) else b[:-2]), a[-2], b[-1]]
    return 2.0 * batch * a[-2] * a[-1] * b[-1], [a, b, out]


def _ints(v: Any, n: int, default: int) -> list[int]:
    """A recorded int list (``"[1, 1]"``), broadcast to ``n`` spatial dims."""
    xs = json.loads(v) if isinstance(v, str) and v else [default]
    xs = xs if isinstance(xs, list) else [xs]
    return [int(x) for x in (xs * n if len(xs) == 1 else xs)]


def _conv_out(x: list[int], w: list[int], stride: Any, pad: Any, dil: Any) -> list[int]:
    n = len(x) - 2
    st, pd, dl = _ints(stride, n, 1), _ints(pad, n, 0), _ints(dil, n, 1)
    spatial = [(x[2 + i] + 2 * pd[i] - dl[i] * (w[2 + i] - 1) - 1) // st[i] + 1 for i in range(n)]
    return [x[0], w[0], *spatial]


def _conv_flops(x: list[int], w: list[int], out: list[int]) -> float:
    # each output element: (input channels per group) x kernel window multiply-adds
    return 2.0 * _prod(out) * _prod(w[1:])


def _conv(stride: int, pad: int, dil: int) -> Callable[[Dims, list[Any]], tuple[float, list[list[int]]]]:
    """A forward convolution whose stride, padding and dilation are scalars ``stride``,
    ``pad``, ``dil`` (positions differ between the aten entry points)."""

    def f(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
        x, w = d[0], d[1]
        out = _conv_out(x, w, s[stride], s[pad], s[dil])
        return _conv_flops(x, w, out), [x, w, out]

    return f


def _conv_backward(d: Dims, s: list[Any]) -> tuple[float, list[list[int]]]:
    """``convolution_backward(grad_out, input, weight, ..., output_mask)``: the input
    gradient and the weight gradient each cost one forward's multiply-adds."""
    g, x, w = d[0], d[1], d[2]
    mask = json.loads(s[10].lower()) if len(s) > 10 and s[10] else [True, True, True]
    passes = int(bool(mask[0])) + int(bool(mask[1]))
    return passes * _conv_flops(x, w, g), [g, x, w, *([x] if mask[0] else []), *([w] if mask[1] else [])]


#: operator -> (FLOPs, operand and result shapes) from (dims, scalars)
FORMULAS: dict[str, Callable[[Dims, list[Any]], tuple[float, list[list[int]]]]] = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::linear": _linear,
    "aten::matmul": _matmul,
    "aten::cudnn_convolution": _conv(3, 2, 4),
    "aten::miopen_convolution": _conv(4, 3, 5),
    "aten::_convolution": _conv(3, 4, 5),
    "aten::convolution": _conv(3, 4, 5),
    "aten::conv2d": _conv(3, 4, 5),
    "aten::conv1d": _conv(3, 4, 5),
    "aten::conv3d": _conv(3, 4, 5),
    "aten::convolution_backward": _conv_backward,
}


def _work(name: str, text: str) -> tuple[float, float, float]:
    """(FLOPs, bytes, bytes per element) of one operator signature; NaN where unknown."""
    nan = (math.nan, math.nan, math.nan)
    f = FORMULAS.get(name)
    if f is None or not text:
        return nan
    try:
        dims, types, scalars = json.loads(text)
        flops, tensors = f(dims, scalars)
        size = ELEMENT_BYTES.get(next(t for t in types if t in ELEMENT_BYTES), 0)
    except (ValueError, TypeError, IndexError, KeyError, StopIteration):
        return nan
    if size == 0 or flops <= 0:
        return nan
    return flops, float(size * sum(_prod(t) for t in tensors)), float(size)


@dataclass
class OpWork:
    """Per analysed event: FLOPs, bytes (at the recorded dtype) and bytes per element of
    a matrix operator recorded with shapes; NaN for every other event."""

    flops: F64
    nbytes: F64
    size: F64


def op_work(a: Analysis) -> OpWork:
    """:class:`OpWork` of every analysed event."""
    n, t = a.nodes, a.table
    out = OpWork(np.full(n.n, np.nan), np.full(n.n, np.nan), np.full(n.n, np.nan))
    if "shapes" not in t.events.column_names:  # stored before shapes were kept
        return out
    shape = t.col("shapes")[n.uid].astype(np.int64)
    name = t.col("name")[n.uid].astype(np.int64)
    names = t.strings("name")
    known = np.flatnonzero(
        (shape > 0) & np.isin(name, np.flatnonzero(np.isin(names.astype(str), list(FORMULAS))))
    )
    if len(known) == 0:
        return out
    texts = t.strings("shapes")
    pairs, inv = np.unique(np.stack([name[known], shape[known]], axis=1), axis=0, return_inverse=True)
    work = np.array([_work(str(names[p[0]]), str(texts[p[1]])) for p in pairs], dtype=np.float64)
    for col, arr in enumerate((out.flops, out.nbytes, out.size)):
        arr[known] = work[inv.ravel(), col]
    return out


def kernel_ops(a: Analysis, kernels: I64) -> I64:
    """Per kernel: the innermost matrix operator with shapes enclosing the call that
    launched it (-1: none), through the launch correlation and the host nesting."""
    w = op_work(a)
    li = c.launcher(a)[kernels]
    op = c.ancestor_in(a, np.isfinite(w.flops))
    return np.where(li >= 0, op[np.maximum(li, 0)], -1)  # type: ignore[no-any-return]
