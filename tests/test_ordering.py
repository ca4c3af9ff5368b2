"""ctda.analysis.ordering.lexsort gives np.lexsort's order: packed keys, ties, overflow."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctda.analysis.ordering import lexsort


@st.composite
def key_sets(draw: st.DrawFn) -> list[np.ndarray]:
    n = draw(st.integers(0, 300))
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["small", "wide", "huge", "bool"]))
        bound = {"small": 3, "wide": 10**9, "huge": 2**62, "bool": 1}[kind]
        values = draw(st.lists(st.integers(-bound, bound), min_size=n, max_size=n))
        key = np.array(values, dtype=np.int64)
        out.append(key > 0 if kind == "bool" else key)
    return out


@settings(max_examples=300, deadline=None)
@given(key_sets())
def test_same_order_as_numpy(keys: list[np.ndarray]) -> None:
    assert np.array_equal(lexsort(keys), np.lexsort(keys))


def test_packed_keys_and_ties_on_a_timeline_shape() -> None:
    """Boundaries of nested events: lane and time nearly sorted, many ties at one instant
    broken by a third key; and a primary key too wide to pack with the others."""
    rng = np.random.default_rng(7)
    n = 50_000
    lane = np.sort(rng.integers(0, 4, n))
    time = np.cumsum(rng.integers(0, 3, n)) + 1_700_000_000_000_000_000
    tie = rng.integers(-(10**12), 0, n)
    for keys in ((tie, time, lane), (tie, lane), (time * 0 + tie, rng.integers(-(2**62), 2**62, n))):
        assert np.array_equal(lexsort(keys), np.lexsort(keys))
    with pytest.raises(ValueError):
        lexsort([])
    assert lexsort([np.zeros(0, dtype=np.int64)]).dtype == np.int64
