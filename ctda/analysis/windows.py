"""Analysis windows: each ProfilerStep, each match of a user annotation regex, or the trace.

A window is a pair of graph nodes (its start and end). Its duration in any replay is the
time between them, so a what-if re-times windows for free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctda.analysis.nodes import Nodes
from ctda.ingest.table import EventTable

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class Window:
    """One analysis window: a label, its step number if any, and its bounding nodes."""

    label: str
    step: int | None
    start_node: int
    end_node: int
    event: int  # analysed index of the defining event, -1 for the whole trace


def whole_trace(nodes: Nodes) -> Window:
    return Window("trace", None, nodes.source, nodes.sink, -1)


def by_name(table: EventTable, nodes: Nodes, pattern: str) -> list[Window]:
    """A window per CPU event whose name matches ``pattern`` (in time order)."""
    rx = re.compile(pattern)
    values = table.strings("name")
    lut = np.array([bool(rx.search(v or "")) for v in values] or [False])
    codes = table.col("name")[nodes.uid]
    hits = np.flatnonzero(lut[codes] & ~nodes.is_gpu)
    hits = hits[np.argsort(nodes.ts[hits], kind="stable")]
    out = []
    for i in hits:
        name = str(values[codes[i]])
        m = STEP_RE.match(name)
        out.append(Window(name, int(m.group(1)) if m else None, int(2 * i), int(2 * i + 1), int(i)))
    return out


def steps(table: EventTable, nodes: Nodes) -> list[Window]:
    """A window per ``ProfilerStep#N`` on a CPU thread."""
    return by_name(table, nodes, r"^ProfilerStep#\d+$")


def step_annotations(table: EventTable, nodes: Nodes, windows: list[Window]) -> npt.NDArray[np.bool_]:
    """Which analysed events mark a step rather than do work: each window's defining event
    and every ``ProfilerStep#N`` span (also when the windows are something else). Making
    one of them faster is no change a person can make to the program."""
    out = np.zeros(nodes.n, dtype=bool)
    out[[w.event for w in windows if w.event >= 0]] = True
    values = table.strings("name")
    lut = np.array([bool(STEP_RE.match(v or "")) for v in values] or [False])
    return out | lut[table.col("name")[nodes.uid]]


def resolve(table: EventTable, nodes: Nodes, spec: str) -> list[Window]:
    """``steps`` (falls back to the whole trace when there are none), ``trace``, or a regex."""
    if spec == "trace":
        return [whole_trace(nodes)]
    if spec == "steps":
        return steps(table, nodes) or [whole_trace(nodes)]
    return by_name(table, nodes, spec)
