"""The reader's set helpers (ctda/ingest/npx.py) against a plain sort, on every path."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ctda.ingest import npx

I64 = np.iinfo(np.int64)
RNG = np.random.default_rng(5)
CASES = {
    "small range": RNG.integers(0, 50, 10_000),
    "negative": RNG.integers(-5, 3, 100),
    "one value": np.array([7]),
    "wide range (sorted path)": RNG.integers(0, 1 << 40, 1_000),
    "int64 extremes": np.array([I64.min, 5, I64.max, 5]),
}
DTYPES = [np.int64, np.int32, np.int16, np.int8, np.uint32, np.uint64]


def _by_sort(v: npt.NDArray[np.generic]) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.int64]]:
    order = np.argsort(v, kind="stable")
    s = v[order]
    new = np.r_[True, s[1:] != s[:-1]]
    codes = np.empty(len(s), dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return s[new], codes


FITTING = [
    pytest.param(case, dtype, id=f"{case}-{np.dtype(dtype).name}")
    for case, raw in CASES.items()
    for dtype in DTYPES
    if np.iinfo(dtype).min <= int(raw.min()) and int(raw.max()) <= np.iinfo(dtype).max
]


@pytest.mark.parametrize(("case", "dtype"), FITTING)
def test_factorize_is_the_sorted_distinct_values_and_their_codes(case: str, dtype: type) -> None:
    v = CASES[case].astype(dtype)
    got, want = npx.factorize(v), _by_sort(v)
    assert got[0].dtype == v.dtype and got[1].dtype == np.int64
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert np.array_equal(got[0][got[1]], v)


@pytest.mark.parametrize(
    ("values", "starts", "positions"),
    [
        ([], [], []),
        ([7], [0], [0]),
        ([3, 3, 1, 1, 1, 3], [0, 2, 5], [0, 1, 0, 1, 2, 0]),
        ([5, 6, 7], [0, 1, 2], [0, 0, 0]),
    ],
)
def test_runs_of_equal_values(values: list[int], starts: list[int], positions: list[int]) -> None:
    v = np.array(values, dtype=np.int64)
    assert npx.run_starts(v).tolist() == starts
    assert npx.run_positions(v).tolist() == positions
