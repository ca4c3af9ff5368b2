"""The interval sweeps (ctda/analysis/intervals.py) against a plain double loop."""

from __future__ import annotations

import numpy as np
import pytest

from ctda.analysis.intervals import intersect, overlap_sums


def _sorted_intervals(rng: np.random.Generator, n: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    start = np.sort(rng.integers(0, span, n)).astype(np.int64)
    end = start + rng.choice([0, 1, 3, 20, 150], n).astype(np.int64)  # ties, empty, long ones
    return start, end


@pytest.mark.parametrize("seed", range(5))
def test_pairs_and_sums_match_a_double_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a0, a1 = _sorted_intervals(rng, 300, 2_000)
    b0, b1 = _sorted_intervals(rng, 400, 2_000)  # overlapping among themselves
    want = [
        (i, j, min(a1[i], b1[j]) - max(a0[i], b0[j]))
        for i in range(len(a0))
        for j in range(len(b0))
        if min(a1[i], b1[j]) > max(a0[i], b0[j])
    ]
    wa, wb, ov = intersect(a0, a1, b0, b1)
    assert sorted(zip(wa.tolist(), wb.tolist(), ov.tolist())) == sorted(want)
    sums = np.zeros(len(a0), dtype=np.int64)
    for i, _, o in want:
        sums[i] += o
    assert np.array_equal(overlap_sums(a0, a1, b0, b1), sums)
    assert len(want) > 100 and (sums == 0).any()  # both cases occur
