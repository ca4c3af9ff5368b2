"""What every rule may read: the events table, the analysed nodes, and cached lookups."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.analysis.nodes import Nodes
from ctda.analysis.ordering import lexsort
from ctda.analysis.rule_options import RuleOptions
from ctda.analysis.rules.timeline import Timeline
from ctda.analysis.rules.timeline import build as build_timeline
from ctda.ingest.table import EventTable

I64 = npt.NDArray[np.int64]
__all__ = ["RuleContext", "RuleOptions"]  # RuleOptions: declared apart, imported from here too


@dataclass
class RuleContext:
    """Shared, lazily computed views used by several rules."""

    table: EventTable
    nodes: Nodes
    options: RuleOptions = field(default_factory=RuleOptions)
    _kept: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def names(self) -> npt.NDArray[np.object_]:
        """Name of each analysed event."""
        return self.table.decoded("name", self.nodes.uid)

    @cached_property
    def name_codes(self) -> I64:
        """Name code of each analysed event (an index into the table's name strings)."""
        return self.table.col("name")[self.nodes.uid].astype(np.int64)  # type: ignore[no-any-return]

    def name_mask(self, pattern: str) -> npt.NDArray[np.bool_]:
        """Analysed events whose name matches ``pattern`` (evaluated once per distinct name)."""
        codes = self.name_codes
        values = self.table.strings("name")
        rx = re.compile(pattern)
        lut = np.array([bool(rx.search(v or "")) for v in values] or [False])
        return lut[codes]

    @cached_property
    def lanes(self) -> Any:
        return self.table.lanes

    @cached_property
    def lane_pid(self) -> npt.NDArray[np.object_]:
        """Process label of every lane (GIL and runtime lock are per process)."""
        return self.table.lanes.sort_values("lane")["pid"].to_numpy(dtype=object)

    @cached_property
    def lane_proc(self) -> I64:
        """A small integer per process, for every lane (``lane_pid`` as codes)."""
        return np.unique(self.lane_pid.astype(str), return_inverse=True)[1].astype(np.int64)  # type: ignore[no-any-return]

    @cached_property
    def by_lane_time(self) -> I64:
        """Analysed indices sorted by (lane, start, longer first)."""
        n = self.nodes
        return lexsort((-(n.end - n.ts), n.ts, n.lane))

    @cached_property
    def launcher(self) -> I64:
        """Analysed index of each analysed event's launching runtime call (-1 when none)."""
        n = self.nodes
        launcher_uid = self.table.col("launcher")[n.uid]
        return np.where(launcher_uid >= 0, n.index_of_uid[np.maximum(launcher_uid, 0)], -1)  # type: ignore[no-any-return]

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``, computed on the first call with ``key`` and kept: a lookup several
        rules build (e.g. the launches sorted by stream and time) is built once."""
        if key not in self._kept:
            self._kept[key] = make()
        return self._kept[key]

    @cached_property
    def timeline(self) -> Timeline:
        """Consecutive event boundaries on each CPU thread (shared by the CPU rules)."""
        return build_timeline(self.nodes)
