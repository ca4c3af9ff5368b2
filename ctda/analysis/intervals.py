"""Overlaps of two lists of intervals ordered by start: compiled sweeps.

``A`` and ``B`` are ``[start, end)`` intervals, each list ordered by start; ``B`` may overlap
itself (other threads' work). Used by the host contention model
(:mod:`ctda.analysis.contention`) and a job's host load (:mod:`ctda.job.hostload`).
"""

from __future__ import annotations

import numpy as np

from ctda.kernels import kernel


@kernel
def intersect(a0, a1, b0, b1):  # type: ignore[no-untyped-def]  # pragma: no cover
    """All overlapping pairs of two start-sorted interval lists (B may overlap itself)."""
    cap = a0.shape[0] + b0.shape[0] + 16
    wa = np.empty(cap, dtype=np.int64)
    wb = np.empty(cap, dtype=np.int64)
    ov = np.empty(cap, dtype=np.int64)
    m = 0
    j0 = 0
    for i in range(a0.shape[0]):
        while j0 < b0.shape[0] and b1[j0] <= a0[i]:
            j0 += 1
        j = j0
        while j < b0.shape[0] and b0[j] < a1[i]:
            lo = max(a0[i], b0[j])
            hi = min(a1[i], b1[j])
            if hi > lo:
                if m == wa.shape[0]:
                    wa = np.concatenate((wa, np.empty(m, dtype=np.int64)))
                    wb = np.concatenate((wb, np.empty(m, dtype=np.int64)))
                    ov = np.concatenate((ov, np.empty(m, dtype=np.int64)))
                wa[m] = i
                wb[m] = j
                ov[m] = hi - lo
                m += 1
            j += 1
    return wa[:m], wb[:m], ov[:m]


@kernel
def overlap_sums(a0, a1, b0, b1):  # type: ignore[no-untyped-def]  # pragma: no cover
    """Per interval of A, its summed overlap with B: :func:`intersect`'s pairs, added up."""
    out = np.zeros(a0.shape[0], dtype=np.int64)
    j0 = 0
    for i in range(a0.shape[0]):
        while j0 < b0.shape[0] and b1[j0] <= a0[i]:
            j0 += 1
        j = j0
        total = 0
        while j < b0.shape[0] and b0[j] < a1[i]:
            hi = min(a1[i], b1[j])
            lo = max(a0[i], b0[j])
            if hi > lo:
                total += hi - lo
            j += 1
        out[i] = total
    return out
