"""``bf16``: the step under ``torch.autocast(dtype=torch.bfloat16)`` (and the shared model).

The model (docs/optimisations.md#bf16--fp16), from the trace alone:

- **matrix kernels** (GEMMs and convolutions, told by name) are compute bound and keep the
  share of the device's peak they reached: their time scales by the ratio of the peak they
  ran at (FP32 CUDA cores, or TF32 when the name says so) to the half-precision tensor peak
  (``deviceProperties`` name -> :data:`~ctda.whatif.optimisations.devices.PEAKS`);
- **memory-bound kernels** (everything else outside the optimiser) move half the bytes:
  their time above the device's shortest kernel (a fixed cost no kernel goes below) halves;
  the optimiser's kernels (under ``Optimizer.*`` annotations, ``_foreach_`` ops, multi-tensor
  apply) stay: autocast keeps the parameters and their updates in FP32;
- **casts**: autocast casts each FP32 operand of a matrix op, except the activation that
  already comes out of the previous autocast op: the weight and, for ``addmm``-style ops,
  the bias, plus the step's input once per step; backward casts each such parameter's
  gradient back to FP32. A cast costs the host what this trace's small one-kernel ops cost
  (the median inclusive time of the ops that directly launch one non-matrix kernel and do
  not block: a dispatch, an allocation and one launch) and the device three quarters
  of the trace's median memory-bound kernel (it reads 4 bytes and writes 2 per element
  where an FP32 unary op reads and writes 4: operands are taken to be activation-sized).
  Host cost goes on the matrix op (forward) or spread over the backward matrix ops of the
  step; device cost on the op's matrix kernel;
- **recorded shapes** (``record_shapes=True``): a matrix kernel launched inside an operator
  whose shapes give its FLOPs and bytes (:mod:`~ctda.whatif.optimisations.shapes`) takes
  the roofline time of that operator in half precision at the share of the FP32 roofline
  it reached (:func:`_roofline`); an operator whose inputs are already half stays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.engine import Analysis
from ctda.ingest.kinds import Kind
from ctda.whatif.effect import Effect
from ctda.whatif.optimisations import OptimisationError, optimisation, shapes
from ctda.whatif.optimisations import common as c
from ctda.whatif.optimisations import devices as d
from ctda.whatif.select import name_mask

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

#: annotations and ops whose kernels update FP32 parameters (autocast leaves them alone)
OPTIMISER = r"^Optimizer\.|^aten::_foreach_|multi_tensor_apply|^aten::_fused_(adam|sgd)"
#: backward work: autograd's evaluate_function wrappers and *Backward nodes
BACKWARD = r"Backward|^autograd::engine"
#: matrix ops that take a bias (one more FP32 operand to cast)
WITH_BIAS = r"^aten::(addmm|baddbmm|addbmm|addmv|_addmm_activation)$"
#: FP32 -> half bytes per element of a cast against an FP32 unary op's (4 + 2) / (4 + 4)
CAST_BYTES = 0.75


def autocast(a: Analysis, dtype: str) -> Effect:
    """The effect of autocast to ``dtype`` (``bf16`` or ``fp16``) on ``a``."""
    n = a.nodes
    peaks, known = d.peaks_of(a)
    half = peaks.bf16 if dtype == "bf16" else peaks.fp16
    nm = c.names(a)
    kern = np.flatnonzero(n.is_gpu & (n.kind == Kind.KERNEL))
    if len(kern) == 0:
        raise OptimisationError(f"{dtype}: the trace has no GPU kernels")
    dur = (n.end - n.ts).astype(np.float64)
    li = c.launcher(a)
    in_opt = c.subtree(a, np.flatnonzero(name_mask(a, OPTIMISER) & ~n.is_gpu))
    opt_k = in_opt[np.maximum(li[kern], 0)] & (li[kern] >= 0) | name_mask(a, OPTIMISER)[kern]
    mat = d.is_matrix(nm[kern])
    prec = d.precision(nm[kern])
    _check_not_half(dtype, dur[kern], mat, prec)
    dk = dur[kern]
    floor = float(np.min(dk[dk > 0])) if (dk > 0).any() else 0.0
    m = mat & (prec < 2) & ~opt_k
    mem = ~mat & ~opt_k & (prec < 2)
    eff = Effect.identity(dtype, n.n)
    eff.factor[kern] = _retimed(dk, np.where(prec == 1, peaks.tf32, peaks.fp32) / half, m, mem, floor)
    roof = _roofline(a, kern, dk, m, prec, peaks, half, floor)
    eff.factor[kern[roof.shaped]] = roof.factor[roof.shaped]
    eff.factor[kern[roof.stays]] = 1.0  # its operator already runs in half precision
    m &= ~roof.stays
    skip = np.zeros(n.n, dtype=bool)
    skip[kern[mat]] = True
    host_ns, n_small = c.one_launch_op_cost(a, skip)
    dev_ns = CAST_BYTES * float(np.median(dk[mem])) if mem.any() else floor
    casts = _casts(a, kern[m & ~opt_k], li, dur, eff, host_ns, dev_ns)
    n_half = int((mat & (prec == 2)).sum())
    eff.assumptions = [
        f"device {peaks.name}"
        + ("" if known else " (not in the peak table: H100's peaks assumed)")
        + f": FP32 {peaks.fp32:g}, TF32 {peaks.tf32:g}, {dtype.upper()} {half:g} TFLOP/s dense",
        f"{int(m.sum()):,} matrix kernels keep their share of peak: x{peaks.fp32 / half:.3f} from FP32, "
        f"x{peaks.tf32 / half:.3f} from TF32 ({n_half:,} already in half precision stay)",
        f"{int(mem.sum()):,} memory-bound kernels move half the bytes above a "
        f"{floor / 1e3:.1f} µs fixed cost; {int(opt_k.sum()):,} optimiser kernels stay FP32",
        f"{casts} casts added (weights and biases of matrix ops, the step's input, gradients back "
        f"to FP32): {host_ns / 1e3:.1f} µs host each (median of {n_small} ops launching one "
        f"non-matrix kernel), {dev_ns / 1e3:.1f} µs device each",
        roof.assumption(dtype, peaks, int(m.sum())),
    ]
    return eff


@dataclass
class Roofline:
    """The shape path: per kernel, its factor where its operator's shapes were recorded."""

    shaped: Mask  # re-timed from its operator's FLOPs and bytes
    stays: Mask  # its operator's recorded inputs are already half precision
    factor: npt.NDArray[np.float64]
    n_ops: int

    def assumption(self, dtype: str, peaks: d.Peaks, n_matrix: int) -> str:
        """The assumptions line saying which path re-timed the matrix kernels."""
        if not self.shaped.any() and not self.stays.any():
            return "no tensor shapes recorded: FLOPs and bytes from each kernel's measured time and class"
        return (
            f"shapes recorded: {int(self.shaped.sum()):,} matrix kernels of {self.n_ops:,} operators "
            f"re-timed on the device roofline (FLOPs / {dtype.upper()} peak, bytes / "
            f"{peaks.mem_tbs:g} TB/s) at the share of the FP32 roofline each reached, "
            f"{int(self.stays.sum()):,} with half-precision inputs stay; "
            f"{max(n_matrix - int(self.shaped.sum()), 0):,} without shapes from measured time and class"
        )


def _roofline(
    a: Analysis,
    kern: I64,
    dur: npt.NDArray[np.float64],
    matrix: Mask,
    prec: npt.NDArray[np.int8],
    peaks: d.Peaks,
    half: float,
    floor: float,
) -> Roofline:
    """Matrix kernels whose launching operator has recorded shapes: the operator's time
    at ``half`` precision is its roofline time there (FLOPs at the tensor peak, operands
    and result at half the bytes over the memory bandwidth), divided by the share of the
    FP32 (or TF32) roofline its kernels reached; each of its kernels scales alike. A
    compute-bound operator gets the time path's ratio of peaks; the shapes add the
    memory bound (a small product stops at its bytes) and cap the share at 1 (kernels
    faster than the FP32 roofline used fewer multiplies, Winograd or FFT)."""
    none = np.zeros(len(kern), dtype=bool)
    out = Roofline(none, none.copy(), np.ones(len(kern)), 0)
    work = shapes.op_work(a)
    op = np.where(matrix | (prec == 2), shapes.kernel_ops(a, kern), -1)
    has = op >= 0
    if not has.any():
        return out
    size = work.size[np.maximum(op, 0)]
    out.stays = has & (size <= 2)
    shaped = has & (size == 4) & matrix
    if not shaped.any():
        return out
    ops, inv = np.unique(op[shaped], return_inverse=True)
    t = np.bincount(inv, weights=dur[shaped])
    tf32 = np.zeros(len(ops), dtype=bool)
    np.logical_or.at(tf32, inv, prec[shaped] == 1)
    flops, nbytes = work.flops[ops], work.nbytes[ops]
    bw = peaks.mem_tbs * 1e3  # bytes per ns
    t32 = np.maximum(flops / (np.where(tf32, peaks.tf32, peaks.fp32) * 1e3), nbytes / bw)
    t16 = np.maximum(flops / (half * 1e3), nbytes / 2 / bw)
    share = np.minimum(t32 / np.maximum(t, 1.0), 1.0)
    ratio = np.where(t > 0, t16 / np.maximum(share, 1e-9) / np.maximum(t, 1.0), 1.0)
    new = np.maximum(dur[shaped] * ratio[inv], floor)
    out.factor[shaped] = np.where(dur[shaped] > 0, new / np.maximum(dur[shaped], 1.0), 1.0)
    out.shaped, out.n_ops = shaped, len(ops)
    return out


def _retimed(
    dur: npt.NDArray[np.float64], ratio: npt.NDArray[np.float64], matrix: Mask, memory: Mask, floor: float
) -> npt.NDArray[np.float64]:
    """Per kernel, its factor: ``matrix`` kernels by the peak ``ratio`` (not below the
    shortest kernel, ``floor``), ``memory`` kernels half their time above ``floor``."""
    new = dur.copy()
    new[matrix] = np.maximum(dur[matrix] * ratio[matrix], floor)
    new[memory] = np.minimum(dur[memory], floor + (dur[memory] - floor) * 0.5)
    return np.where(dur > 0, new / np.maximum(dur, 1.0), 1.0)


def _check_not_half(dtype: str, dur: npt.NDArray[np.float64], mat: Mask, prec: npt.NDArray[np.int8]) -> None:
    """Refuse a trace whose matrix work already runs in half precision (already autocast)."""
    total = float(dur[mat].sum())
    if total <= 0:
        raise OptimisationError(f"{dtype}: the trace has no matrix kernels (GEMMs, convolutions) to re-time")
    if float(dur[mat & (prec == 2)].sum()) >= 0.5 * total:
        raise OptimisationError(
            f"{dtype}: most matrix-kernel time already runs in half precision "
            "(the step is already under autocast)"
        )


def _candidates(a: Analysis) -> list[str]:
    """``bf16`` where the trace has FP32/TF32 matrix kernels."""
    n = a.nodes
    kern = np.flatnonzero(n.is_gpu & (n.kind == Kind.KERNEL))
    nm = c.names(a)[kern]
    return ["bf16"] if (d.is_matrix(nm) & (d.precision(nm) < 2)).any() else []


def _casts(
    a: Analysis, mk: I64, li: I64, dur: npt.NDArray[np.float64], eff: Effect, host_ns: int, dev_ns: float
) -> int:
    """Add autocast's casts to ``eff`` for the matrix kernels ``mk``; the number added."""
    n = a.nodes
    ok = li[mk] >= 0
    mk = mk[ok]
    if len(mk) == 0:
        return 0
    op = (n.kind == Kind.CPU_OP) & ~n.is_gpu
    top = c.top_ancestor_below(a, li[mk], ~op)
    has_op = op[top]
    mk, top = mk[has_op], top[has_op]
    if len(top) == 0:
        return 0
    tops, first = np.unique(top, return_index=True)
    kernel_of = mk[first]  # the first matrix kernel of each op carries its casts' device time
    backward = c.subtree(a, np.flatnonzero(name_mask(a, BACKWARD) & ~n.is_gpu))[tops]
    bias_ev = np.flatnonzero(name_mask(a, WITH_BIAS) & ~n.is_gpu)
    bias_top = np.unique(c.top_ancestor_below(a, bias_ev, ~op)) if len(bias_ev) else np.zeros(0, np.int64)
    operands = np.where(np.isin(tops, bias_top), 3, 2)
    win = c.regions(a, None).of(a, tops)
    per = np.where(~backward, operands - 1, 0).astype(np.float64)
    fwd = np.flatnonzero(~backward)
    if len(fwd):  # the step's input: one cast at the first forward matrix op of each window
        w = win[fwd]
        order = np.lexsort((n.ts[tops[fwd]], w))
        head = np.ones(len(order), dtype=bool)
        head[1:] = w[order][1:] != w[order][:-1]
        per[fwd[order][head]] += 1
    # backward: each parameter cast of the window comes back as a gradient cast, spread over
    # the window's backward matrix ops
    bwd = np.flatnonzero(backward)
    if len(bwd):
        key = np.where(win >= 0, win, -1) + 1
        params = np.bincount(
            key[fwd], weights=(operands[fwd] - 1).astype(np.float64), minlength=key.max() + 1
        )
        count = np.bincount(key[bwd], minlength=key.max() + 1)
        per[bwd] = params[key[bwd]] / np.maximum(count[key[bwd]], 1)
    incl = (n.end[tops] - n.ts[tops]).astype(np.float64)
    grow = np.where(incl > 0, (incl + per * host_ns) / np.maximum(incl, 1.0), 1.0)
    # inclusive: the op's own time and everything nested in it on its thread grows alike
    marked = np.zeros(n.n, dtype=bool)
    marked[tops] = True
    where = np.full(n.n, -1, dtype=np.int64)
    where[tops] = np.arange(len(tops))
    anc = c.ancestor_in(a, marked)
    inside = anc >= 0
    eff.factor[inside] *= grow[where[anc[inside]]]
    kd = dur[kernel_of]
    add = np.where(kd > 0, (eff.factor[kernel_of] * kd + per * dev_ns) / np.maximum(kd, 1.0), 1.0)
    eff.factor[kernel_of] = np.where(kd > 0, add, eff.factor[kernel_of])
    return int(np.rint(per.sum()))


@optimisation("bf16", candidates=_candidates)
def bf16(a: Analysis, arg: str | None) -> Effect:
    """Autocast to BF16: matrix kernels re-timed by the device's BF16 tensor peak,
    memory-bound kernels by half the bytes, autocast's casts added on host and device."""
    return autocast(a, "bf16")
