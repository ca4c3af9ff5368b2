"""The reader's output: a columnar events table plus trace metadata."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctda.ingest.timestamps import NA

__all__ = ["NA", "EventTable", "TraceMeta", "column_array"]


def column_array(table: pa.Table, name: str) -> pa.Array:
    """A column as one Arrow array; zero-copy when it is one chunk (combine_chunks copies)."""
    column = table.column(name)
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


@dataclass
class TraceMeta:
    """Document-level facts about a trace, and what the reader could not interpret."""

    path: str
    n_bytes: int = 0
    bare_list: bool = False
    schema_version: int | None = None
    distributed_info: dict[str, Any] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    base_time_ns: int | None = None
    trace_name: str | None = None
    host_name: str | None = None  # top-level ``host_name`` (ranks of one host share a clock)
    top_level_keys: list[str] = field(default_factory=list)
    warnings: dict[str, int] = field(default_factory=dict)

    def warn(self, what: str, count: int = 1) -> None:
        """Count an odd-but-kept situation; never used for dropped data (we drop none)."""
        if count:
            self.warnings[what] = self.warnings.get(what, 0) + int(count)

    @property
    def rank(self) -> int | None:
        value = self.distributed_info.get("rank")
        return int(value) if isinstance(value, int) else None

    @property
    def world_size(self) -> int | None:
        value = self.distributed_info.get("world_size")
        return int(value) if isinstance(value, int) else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> TraceMeta:
        return cls(**json.loads(text))


@dataclass
class EventTable:
    """Every event of a trace as Arrow columns (dictionary-encoded strings, NA-sentinel ints).

    ``events`` has one row per trace event in file order (``uid`` = index);
    ``lanes`` describes CPU threads and GPU streams; ``flows`` pairs flow start/finish
    events with the complete events they bind to.
    """

    events: pa.Table
    lanes: pd.DataFrame
    flows: pd.DataFrame
    meta: TraceMeta
    _np: dict[str, npt.NDArray[Any]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return self.events.num_rows

    def col(self, name: str) -> npt.NDArray[Any]:
        """A numeric column as numpy (zero-copy, cached); dictionary columns give codes."""
        if name not in self._np:
            arr = column_array(self.events, name)
            if pa.types.is_dictionary(arr.type):
                arr = arr.indices
            self._np[name] = arr.to_numpy(zero_copy_only=False)
        return self._np[name]

    def strings(self, name: str) -> npt.NDArray[np.object_]:
        """The dictionary values of a string column (index with ``col(name)``)."""
        arr = column_array(self.events, name)
        return np.asarray(arr.dictionary.to_pylist(), dtype=object)

    def decoded(self, name: str, rows: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.object_]:
        """String values of a dictionary column for ``rows`` (all rows when None)."""
        codes = self.col(name)
        if rows is not None:
            codes = codes[rows]
        values = self.strings(name)
        out = np.empty(len(codes), dtype=object)
        valid = codes >= 0
        out[valid] = values[codes[valid]]
        return out

    def counts(self) -> Counter[str]:
        """Events by phase, for summaries and the manifest checks."""
        ph = self.decoded("ph")
        return Counter(ph.tolist())

    # --- persistence ----------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        """Events with lanes and metadata embedded as schema metadata; flows are not kept
        here (an analysis snapshot stores them beside; else
        :func:`ctda.ingest.reader.from_arrow` binds them again)."""
        md = {
            b"ctda.meta": self.meta.to_json().encode(),
            b"ctda.lanes": self.lanes.to_json(orient="split").encode(),
        }
        return self.events.replace_schema_metadata({**(self.events.schema.metadata or {}), **md})

    def write_parquet(self, path: Path) -> None:
        """Write events with lanes, flows and metadata embedded as schema metadata."""
        pq.write_table(self.to_arrow(), path, compression="zstd")


def lanes_frame(blob: bytes) -> pd.DataFrame:
    """The lanes table from its embedded JSON (``to_json(orient="split")``)."""
    payload = json.loads(blob)
    frame = pd.DataFrame(payload["data"], columns=payload["columns"])
    for c in frame.columns:
        if frame[c].dtype == object and frame[c].map(lambda v: isinstance(v, bool)).all():
            frame[c] = frame[c].astype(bool)
    return frame
