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
#: the largest duration factor a what-if takes: a million times slower is already far past
#: any question a what-if answers, and it keeps every scaled time well inside int64 ns
MAX_FACTOR = 1e6
_MAX_TEXT = f"{MAX_FACTOR:g}".replace("e+0", "e")  # 1e6
#: the largest absolute duration a what-if may give an event (ns): the reader's time bound
MAX_DUR_NS = 1 << 62


class SelectionError(CtdaError, ValueError):
    """A selection that cannot be parsed or matches nothing."""


def check_factor(value: object, what: str) -> float:
    """``value`` as a factor: a finite number in [0, :data:`MAX_FACTOR`]; else a one-line
    :class:`SelectionError` naming ``what`` (the option, query or scenario it came from)."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise SelectionError(f"{what}: the factor {value!r} is not a number") from None
    if not 0.0 <= f <= MAX_FACTOR:  # NaN fails both comparisons
        raise SelectionError(f"{what}: the factor {value!r} must be a finite number from 0 to {_MAX_TEXT}")
    return f


def dur_factor(new_ns: float, old_ns: float, label: str) -> float:
    """The factor an absolute duration stands for (1 for an event that took no time),
    bounded like any factor: a duration a million times the observed one is refused."""
    if old_ns <= 0:
        return 1.0
    ratio = float(new_ns) / float(old_ns)
    if ratio > MAX_FACTOR:
        raise SelectionError(
            f"{label}: {new_ns / 1e3:g} µs is {ratio:.3g}x the event's {old_ns / 1e3:g} µs, past the largest "
            f"factor ({_MAX_TEXT})"
        )
    return ratio


@dataclass
class Override:
    """New durations for some analysed events: a factor, or absolute durations (ns).

    Checked on construction, whatever made it (an option, a query's rows, a stored
    scenario): a factor per :func:`check_factor`, durations in [0, :data:`MAX_DUR_NS`].
    """

    label: str
    events: I64
    factor: float | None = None
    dur_ns: I64 | None = None

    def __post_init__(self) -> None:
        if self.factor is not None:
            self.factor = check_factor(self.factor, self.label)
        if self.dur_ns is not None:
            d = np.asarray(self.dur_ns)
            if d.dtype.kind not in "iu" or (len(d) and (int(d.min()) < 0 or int(d.max()) > MAX_DUR_NS)):
                raise SelectionError(f"{self.label}: durations must be whole ns from 0 to 2^62")

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
    key, value = m.group("key"), m.group("value")
    factor = check_factor(m.group("factor"), f"--scale {spec!r}")
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
        uids.append(_whole(r["uid"], label))
        if r.get("factor") is not None:
            factors.append(check_factor(r["factor"], f"{label} (uid {r['uid']})"))
        else:
            factors.append(np.nan)
        durs.append(_dur_us(r["dur"], label) if r.get("dur") is not None else np.nan)
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


def _whole(value: object, label: str) -> int:
    """A query's ``uid`` as an int64 (a whole float or a numeric string too); else one line."""
    try:
        v = int(value) if not isinstance(value, float) or value.is_integer() else None  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        v = None
    if v is None or not -(2**63) <= v < 2**63:
        raise SelectionError(f"{label}: uid {value!r} is not an event uid")
    return v


def _dur_us(value: object, label: str) -> float:
    """A query's ``dur`` (µs): finite, >= 0 and within the time range ctda computes with."""
    try:
        d = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise SelectionError(f"{label}: dur {value!r} is not a number of µs") from None
    if not 0.0 <= d <= MAX_DUR_NS / 1000:
        raise SelectionError(f"{label}: dur {value!r} µs must be a finite number from 0 to 2^62 ns")
    return d
