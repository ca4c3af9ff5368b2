"""Planning a replication: which events form the replicated window, and how ids move.

Part of the step replicator (:mod:`bench.replicate`): :func:`plan` finds the window of a
trace's events, the events that belong to it and the stride of every id family.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt

from ctda.ingest.kinds import CPU_KINDS, Kind, kind_of

Event = dict[str, Any]
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_FLOW_PH = frozenset({"s", "t", "f"})
_LAUNCH_KINDS = frozenset({Kind.RUNTIME, Kind.DRIVER})
#: ``args`` keys holding ids that must be fresh in every copy -> family
ID_ARGS: dict[str, str] = {
    "correlation": "corr",
    "External id": "ext",
    "external id": "ext",
    "Ev Idx": "evidx",
    "Profiler Event Index": "evidx",
    "Python id": "py",
    "Record function id": "rf",
    "Sequence number": "seq",
}
#: ``args`` keys that *refer* to another event's id: shifted only when the referenced
#: event is replicated too (a Python frame's parent may be an outer frame that is not)
REF_ARGS: dict[str, str] = {
    "Python parent id": "Python id",
    "wait_on_cuda_event_record_corr_id": "correlation",
}


# --- small value helpers ---------------------------------------------------------------
def _as_int(value: object) -> int | None:
    """An id as int: ints and digit strings; anything else is not shiftable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _is_num(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _add_exact(value: int | float, delta: int) -> int | float:
    """``value + delta`` without float rounding drift in the printed digits."""
    if isinstance(value, int):
        return value + delta
    return float(Decimal(repr(value)) + delta)


def parse_amount(text: str) -> int:
    """``1000000``, ``1e6``, ``1M``, ``1G`` (powers of 1000) or ``1GiB`` (powers of 1024)."""
    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([kKmMgGtT]?)(i?[bB]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not an amount: {text!r}")
    base = 1024 if m.group(3).lower().startswith("i") else 1000
    power = " KMGT".index(m.group(2).upper() or " ")
    return math.ceil(float(m.group(1)) * base**power)


# --- planning: which events form the window, and how ids move --------------------------
@dataclass
class Plan:
    """What gets replicated and by how much each id family moves per copy."""

    lo: float  #: window start (µs): first CPU ProfilerStep start, or first event
    hi: float  #: window end (µs, exclusive): last CPU ProfilerStep end, or last event end
    members: npt.NDArray[np.int64]  #: indices of the replicated events, in file order
    shift_us: int  #: time shift per copy: the members' full extent, rounded up to 1 µs
    strides: dict[str, int]  #: per family: id increment per copy
    step_based: bool
    ref_targets: dict[str, set[int]] = field(default_factory=dict)  #: ids defined in the window


def _kind(e: Event) -> Kind:
    return kind_of(str(e.get("ph", "")), str(e.get("cat", "")))


def _window(events: list[Event], kinds: list[Kind]) -> tuple[float, float, bool]:
    """(lo, hi, step_based): the CPU ProfilerStep span, else the span of all events."""
    steps = [
        e
        for e, k in zip(events, kinds, strict=True)
        if k in CPU_KINDS and STEP_RE.match(str(e.get("name", ""))) and _is_num(e.get("ts"))
    ]
    if steps:
        return (
            min(e["ts"] for e in steps),
            max(e["ts"] + (e.get("dur") or 0) for e in steps),
            True,
        )
    cand = [e for e, k in zip(events, kinds, strict=True) if _candidate(e, k)]
    if not cand:
        raise ValueError("trace has no timed events to replicate")
    lo = min(e["ts"] for e in cand)
    end = max(e["ts"] + (e.get("dur") if _is_num(e.get("dur")) else 0) for e in cand)
    return lo, end + 1e-3, False  # +1 ns: the window end is exclusive


def _candidate(e: Event, kind: Kind) -> bool:
    """Events that may be replicated at all.

    Metadata describes lanes (shared by all copies); the profiler span and the global
    "Iteration Start"/"Record Window End" instants mark the session, not a step.
    """
    if kind in (Kind.METADATA, Kind.TRACE_SPAN) or not _is_num(e.get("ts")):
        return False
    return not (kind == Kind.INSTANT and e.get("s") == "g")


def _members(events: list[Event], kinds: list[Kind], lo: float, hi: float) -> npt.NDArray[np.bool_]:
    """Which events belong to the window.

    Plain events: their start is inside [lo, hi). GPU work and sync records follow their
    launching runtime call (GPU work of the last step runs after the step ends; work
    launched before the window may run inside it). A flow follows its start point, so
    both ends of a pair always land in the same copy.
    """
    n = len(events)
    inside = np.zeros(n, dtype=bool)
    launcher: dict[int, int] = {}
    for i, (e, k) in enumerate(zip(events, kinds, strict=True)):
        if k in _LAUNCH_KINDS:
            c = _as_int((e.get("args") or {}).get("correlation"))
            if c is not None:
                launcher.setdefault(c, i)
    flows: dict[tuple[str, object], list[int]] = {}
    deferred: list[tuple[int, int]] = []
    for i, (e, k) in enumerate(zip(events, kinds, strict=True)):
        if not _candidate(e, k):
            continue
        if k == Kind.FLOW:
            flows.setdefault((str(e.get("cat", "")), e.get("id")), []).append(i)
            continue
        c = _as_int((e.get("args") or {}).get("correlation")) if k not in _LAUNCH_KINDS else None
        if c is not None and c in launcher:
            deferred.append((i, launcher[c]))
        else:
            inside[i] = lo <= e["ts"] < hi
    for i, j in deferred:
        inside[i] = inside[j]
    for idx in flows.values():
        anchors = [i for i in idx if events[i].get("ph") == "s"] or idx
        start = min(events[i]["ts"] for i in anchors)
        inside[idx] = lo <= start < hi
    return inside


def _int_fields(e: Event) -> Iterator[tuple[str, int]]:
    """(family, value) of every id this event carries."""
    if e.get("ph") in _FLOW_PH:
        v = _as_int(e.get("id"))
        if v is not None:
            yield "corr", v  # ac2g flow ids are correlation ids: keep them equal
    m = STEP_RE.match(str(e.get("name", "")))
    if m:
        yield "step", int(m.group(1))
    args = e.get("args")
    if isinstance(args, dict):
        for key, fam in ID_ARGS.items():
            v = _as_int(args.get(key))
            if v is not None:
                yield fam, v
        for key, target in REF_ARGS.items():
            v = _as_int(args.get(key))
            if v is not None:
                yield ID_ARGS[target], v


def plan(events: list[Event], shift_us: int | None = None) -> Plan:
    """Decide the window, its members, the time shift and the id strides.

    ``shift_us`` (at least the window's extent) makes several traces' copies line up, as
    the ranks of one job must.
    """
    kinds = [_kind(e) for e in events]
    lo, hi, step_based = _window(events, kinds)
    inside = _members(events, kinds, lo, hi)
    members = np.flatnonzero(inside)
    if len(members) == 0:
        raise ValueError("the replication window holds no events")
    starts = [events[i]["ts"] for i in members]
    ends = [events[i]["ts"] + (events[i]["dur"] if _is_num(events[i].get("dur")) else 0) for i in members]
    shift = max(1, math.ceil(max(ends)) - math.floor(min(starts)))
    if shift_us is not None:
        if shift_us < shift:
            raise ValueError(f"shift {shift_us} us is shorter than the window ({shift} us)")
        shift = shift_us
    # stride = (largest value anywhere) - (smallest value in the window) + 1: copy k's
    # values then lie above every original value and above copy k-1's
    top: dict[str, int] = {}
    bottom: dict[str, int] = {}
    for i, e in enumerate(events):
        for fam, v in _int_fields(e):
            top[fam] = max(top.get(fam, v), v)
            if inside[i]:
                bottom[fam] = min(bottom.get(fam, v), v)
    strides = {fam: top[fam] - bottom[fam] + 1 for fam in bottom}
    strides["ts"] = shift
    targets: dict[str, set[int]] = {t: set() for t in REF_ARGS.values()}
    for m in members:
        args = events[m].get("args")
        if isinstance(args, dict):
            for t, ids in targets.items():
                ref = _as_int(args.get(t))
                if ref is not None:
                    ids.add(ref)
    return Plan(lo, hi, members, shift, strides, step_based, targets)
