"""Selections: which analysed events a scenario changes, and by how much.

Shorthands (``--scale``): ``name~REGEX=F``, ``cat=CATEGORY=F``, ``class=CLASS=F``,
``thread=TID=F``; ``--remove REGEX`` is ``name~REGEX=0``. Cypher selections return rows
``(uid, factor)`` or ``(uid, dur)`` with ``dur`` in microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ctda.analysis.classify import CLASSES
from ctda.analysis.engine import Analysis
from ctda.errors import CtdaError
from ctda.ingest.kinds import Kind

I64 = npt.NDArray[np.int64]
_SCALE = re.compile(r"^(?P<key>name~|cat=|class=|thread=)(?P<value>.*)=(?P<factor>[0-9.eE+-]+)$")


class SelectionError(CtdaError, ValueError):
    """A selection that cannot be parsed or matches nothing."""


@dataclass
class Override:
    """New durations for some analysed events: a factor, or absolute durations (ns)."""

    label: str
    events: I64
    factor: float | None = None
    dur_ns: I64 | None = None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "n_events": len(self.events), "factor": self.factor}


def name_mask(a: Analysis, pattern: str) -> npt.NDArray[np.bool_]:
    """Per analysed event: whether its name matches the regex (one test per distinct name)."""
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise SelectionError(f"bad regex {pattern!r}: {exc}") from None
    values = a.table.strings("name")
    # the last entry answers for events without a name (code -1)
    lut = np.array([bool(rx.search(v or "")) for v in values] + [False])
    return lut[a.table.col("name")[a.nodes.uid]]


def _mask_cat(a: Analysis, cat: str) -> npt.NDArray[np.bool_]:
    cats = a.table.decoded("cat", a.nodes.uid)
    kind_names = {k.name.lower(): int(k) for k in Kind}
    by_cat = cats == cat
    if cat.lower() in kind_names:
        by_cat |= a.nodes.kind == kind_names[cat.lower()]
    return np.asarray(by_cat, dtype=bool)


def _mask_class(a: Analysis, cls: str) -> npt.NDArray[np.bool_]:
    if cls not in CLASSES:
        raise SelectionError(f"unknown class {cls!r}; choose from {', '.join(CLASSES)}")
    return np.asarray(a.event_cls == CLASSES.index(cls), dtype=bool)


def _mask_thread(a: Analysis, tid: str) -> npt.NDArray[np.bool_]:
    lanes = a.table.lanes
    hit = lanes[(lanes.tid.astype(str) == tid) | (lanes.thread_name.astype(str) == tid)].lane.to_numpy()
    return np.isin(a.nodes.lane, hit)


def parse_scale(a: Analysis, spec: str) -> Override:
    """One ``--scale`` shorthand."""
    m = _SCALE.match(spec.strip())
    if not m:
        raise SelectionError(
            f"cannot parse --scale {spec!r}: use name~REGEX=F, cat=C=F, class=C=F or thread=TID=F"
        )
    key, value, factor = m.group("key"), m.group("value"), float(m.group("factor"))
    if factor < 0:
        raise SelectionError(f"--scale {spec!r}: the factor must be >= 0")
    pick = {"name~": name_mask, "cat=": _mask_cat, "class=": _mask_class, "thread=": _mask_thread}[key]
    events = np.flatnonzero(pick(a, value))
    if len(events) == 0:
        raise SelectionError(f"--scale {spec!r} matches no event")
    return Override(label=spec, events=events.astype(np.int64), factor=factor)


def parse_remove(a: Analysis, pattern: str) -> Override:
    return parse_scale(a, f"name~{pattern}=0")


def from_rows(a: Analysis, rows: Iterable[Mapping[str, Any]], label: str) -> list[Override]:
    """Overrides from query rows with ``uid`` and either ``factor`` or ``dur`` (µs)."""
    uids, factors, durs = [], [], []
    for r in rows:
        if "uid" not in r or ("factor" not in r and "dur" not in r):
            raise SelectionError("a what-if query must return columns uid and factor, or uid and dur (µs)")
        uids.append(int(r["uid"]))
        factors.append(float(r["factor"]) if "factor" in r and r["factor"] is not None else np.nan)
        durs.append(float(r["dur"]) if "dur" in r and r["dur"] is not None else np.nan)
    if not uids:
        raise SelectionError("the what-if query returned no rows")
    uid = np.asarray(uids, dtype=np.int64)
    idx = np.where(
        (uid >= 0) & (uid < len(a.nodes.index_of_uid)), a.nodes.index_of_uid[np.clip(uid, 0, None)], -1
    )
    if (idx < 0).any():
        raise SelectionError(f"{int((idx < 0).sum())} uid(s) are not analysed events of this run")
    f = np.asarray(factors)
    d = np.asarray(durs)
    out = []
    if np.isfinite(f).any():
        for value in np.unique(f[np.isfinite(f)]):
            out.append(Override(label=f"{label} (x{value:g})", events=idx[f == value], factor=float(value)))
    if np.isfinite(d).any():
        sel = np.isfinite(d)
        out.append(
            Override(label=f"{label} (dur)", events=idx[sel], dur_ns=np.rint(d[sel] * 1000).astype(np.int64))
        )
    return out
