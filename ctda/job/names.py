"""Event names as codes (per rank, in the worker): the reader's dictionary codes of the name
column and the names they index, so that per-name work (a pattern, dropping addresses,
grouping, sending names back as categories) costs one step per distinct name, not one per
event. A rank of a million events has a few thousand distinct names; decoding every
event's name to a Python string, then hashing those strings again for each use, was most
of a rank's skeleton.

Contract: ``NameCodes.of(table, rows)`` -> codes (one per row) into ``values``; ``values``
ends with ``None`` for rows without a name, so ``values[codes]`` is exactly
``table.decoded("name", rows)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NameCodes:
    """Per row, an index into ``values`` (the names, ``None`` for none; not necessarily distinct)."""

    codes: I64
    values: npt.NDArray[np.object_]

    @classmethod
    def of(cls, table: EventTable, rows: I64) -> NameCodes:
        values = np.append(table.strings("name"), np.array([None], dtype=object))
        codes = table.col("name")[rows].astype(np.int64)
        return cls(np.where(codes >= 0, codes, len(values) - 1), values)

    def __getitem__(self, rows: Any) -> NameCodes:
        return NameCodes(self.codes[rows], self.values)

    def decoded(self) -> npt.NDArray[np.object_]:
        """Each row's name (as ``EventTable.decoded``)."""
        return self.values[self.codes]  # type: ignore[no-any-return]

    def map(self, fn: Callable[[str], Any], dtype: Any) -> npt.NDArray[Any]:
        """``fn(str(name))`` of every row, computed once per name in ``values``."""
        lut = np.empty(len(self.values), dtype=dtype)
        lut[:] = [fn(str(v)) for v in self.values]
        return lut[self.codes]  # type: ignore[no-any-return]

    def mapped(self, fn: Callable[[str], str]) -> NameCodes:
        """The rows' names through ``fn`` (of ``str(name)``), as codes into distinct names."""
        codes, uniq = pd.factorize(np.asarray([fn(str(v)) for v in self.values], dtype=object))
        return NameCodes(codes.astype(np.int64)[self.codes], np.asarray(uniq, dtype=object))

    def categorical(self) -> pd.Categorical:
        """The rows' names as ``pd.Categorical(decoded())`` gives them: the names used, sorted,
        as categories; ``None`` as missing."""
        used = np.unique(self.codes)
        ucodes, uniq = pd.factorize(self.values[used])  # None -> -1
        uniq = np.asarray(uniq, dtype=object)
        order = np.argsort(uniq, kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        lut = np.full(len(self.values), -1, dtype=np.int64)
        lut[used] = np.where(ucodes >= 0, rank[np.maximum(ucodes, 0)], -1)
        return pd.Categorical.from_codes(lut[self.codes], categories=pd.Index(uniq[order]))
