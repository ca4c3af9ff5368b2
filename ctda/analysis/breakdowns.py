"""Every breakdown of one analysis, by kind: the one registry the CLI, store and UI read.

A kind is a function of (analysis, device work) returning one DataFrame
(:mod:`ctda.analysis.breakdown`, :mod:`ctda.analysis.launches`, :mod:`ctda.analysis.memory`);
each is computed once
per :class:`Breakdowns` and shared by whoever shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

import pandas as pd

from ctda.analysis import breakdown, launches, memory
from ctda.analysis.engine import Analysis

Kind = Callable[[Analysis, breakdown.Device], pd.DataFrame]
#: kind -> how it is computed, in the order they are shown
KINDS: dict[str, Kind] = {
    "temporal": breakdown.temporal,
    "idle": breakdown.idle,
    "overlap": launches.overlap,
    "launches": launches.launches,
    "queues": launches.queues,
    "memory": memory.memory,
    "classes": lambda a, dev: breakdown.kernel_classes(a, dev),
    "kernels": breakdown.kernels,
}


class Breakdowns:
    """The breakdowns of one analysis, each computed on first use."""

    def __init__(self, a: Analysis) -> None:
        self.a = a
        self.device = breakdown.Device(a)
        self._tables: dict[str, pd.DataFrame] = {}

    def table(self, kind: str) -> pd.DataFrame:
        if kind not in KINDS:
            raise KeyError(kind)
        if kind not in self._tables:
            if kind == "classes":  # from the kernel table, not a second pass over the work
                frame = breakdown.kernel_classes(self.a, self.device, self.table("kernels"))
            else:
                frame = KINDS[kind](self.a, self.device)
            self._tables[kind] = frame
        return self._tables[kind]

    @property
    def has_device(self) -> bool:
        return self.device.any

    @cached_property
    def temporal(self) -> pd.DataFrame:
        return self.table("temporal")

    @cached_property
    def idle(self) -> pd.DataFrame:
        return self.table("idle")

    @cached_property
    def kernels(self) -> pd.DataFrame:
        return self.table("kernels")

    @cached_property
    def classes(self) -> pd.DataFrame:
        return self.table("classes")


class JobBreakdowns:
    """The breakdowns of every rank of a job, one table per kind with a ``rank`` column.

    Ranks are analysed one after the other and only their tables kept, so a job needs the
    memory of its largest rank, not of all of them.
    """

    def __init__(self, ranks: dict[int, dict[str, pd.DataFrame]], has_device: bool) -> None:
        self.has_device = has_device
        self._tables: dict[str, pd.DataFrame] = {}
        for kind in KINDS:
            parts = [t[kind].assign(rank=r) for r, t in sorted(ranks.items()) if len(t[kind])]
            frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["rank"])
            self._tables[kind] = frame[["rank", *[c for c in frame.columns if c != "rank"]]]

    def table(self, kind: str) -> pd.DataFrame:
        if kind not in KINDS:
            raise KeyError(kind)
        return self._tables[kind]

    @classmethod
    def of_files(cls, paths: list[Path], analyze: Callable[[Path], Analysis]) -> JobBreakdowns:
        """Each trace analysed with ``analyze``; its rank from ``distributedInfo`` or the name."""
        from ctda.job.load import rank_of

        ranks: dict[int, dict[str, pd.DataFrame]] = {}
        has_device = False
        for path in paths:
            a = analyze(path)
            every = Breakdowns(a)
            ranks[rank_of(str(path), a.table.meta).rank] = {kind: every.table(kind) for kind in KINDS}
            has_device = has_device or every.has_device
        return cls(ranks, has_device)
