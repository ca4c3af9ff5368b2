"""Event names as dictionary codes (``ctda.job.names``): the same names, categories and
pattern matches as the decoded strings give, on a shipped rank trace."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctda.ingest.reader import read_trace
from ctda.job.hostload import bare
from ctda.job.names import NameCodes

RANK = Path(__file__).parent / "data" / "multirank" / "g_ddp_ws2_compute30_r1" / "rank0.pt.trace.json.gz"


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    return read_trace(RANK, parallel=False)


def test_codes_decode_to_the_tables_names(table) -> None:  # type: ignore[no-untyped-def]
    rows = np.arange(len(table.events))[::3]
    names = NameCodes.of(table, rows)
    assert list(names.decoded()) == list(table.decoded("name", rows))
    # a row subset keeps pointing into the same names
    assert list(names[5:9].decoded()) == list(table.decoded("name", rows[5:9]))


def test_categorical_is_pandas_own_of_the_strings(table) -> None:  # type: ignore[no-untyped-def]
    rows = np.arange(len(table.events))[::7]
    names = NameCodes.of(table, rows)
    got, want = names.categorical(), pd.Categorical(table.decoded("name", rows))
    assert list(got.categories) == list(want.categories)  # the names used, sorted
    assert (got.codes == want.codes).all()
    # a name missing on a row is missing, and a name used by no row is no category
    some = NameCodes(np.array([0, len(names.values) - 1, 0]), names.values)
    cat = some.categorical()
    assert list(cat.categories) == [names.values[0]] and list(cat.codes) == [0, -1, 0]


def test_map_and_mapped_apply_once_per_name(table) -> None:  # type: ignore[no-untyped-def]
    rows = np.arange(len(table.events))
    names = NameCodes.of(table, rows)
    decoded = table.decoded("name", rows)
    rx = re.compile(r"^aten::")
    assert (
        names.map(lambda v: rx.match(v) is not None, bool) == [rx.match(str(v)) is not None for v in decoded]
    ).all()
    stripped = names.mapped(bare)
    assert list(stripped.decoded()) == [bare(str(v)) for v in decoded]
    assert len(set(stripped.values)) == len(stripped.values)  # distinct: codes group rows
    assert any("0x" in str(v) for v in decoded) and not any("0x" in str(v) for v in stripped.values)
