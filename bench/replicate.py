"""Step replicator: grow a real Kineto trace into a large synthetic one.

The replicated *window* is the span of the trace's CPU ``ProfilerStep#N`` events (or the
whole trace when it has none). Every event that belongs to the window (CPU and GPU events,
counters, instants and flow points, see :func:`plan`) is appended ``copies`` times, copy
``k`` shifted in time by ``k * shift`` where ``shift`` is the window's full extent, and with
fresh ids in every id family (correlation, External id, Ev Idx, flow id, Python id,
Record function id, Sequence number, ProfilerStep number). Events after the window are
moved behind the last copy and events enclosing the window (the profiler span, an outer
Python frame) are stretched over the copies, so the result is still one coherent timeline.

Speed: a copy is rendered from one ``%``-format template of the whole window, filled with
``base + k * stride`` computed by numpy, so per-copy work is a few C-level passes rather
than per-event Python. Output is streamed copy by copy (gzip when the name ends ``.gz``).

CLI::

    python -m bench.replicate SRC OUT --events 1M     # until >= 1e6 events
    python -m bench.replicate SRC OUT --bytes 1G      # until >= 1e9 bytes of JSON
    python -m bench.replicate SRC OUT --copies 3      # exactly 3 extra copies
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import math
import re
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import numpy.typing as npt

from bench.replicate_plan import (
    _FLOW_PH,
    ID_ARGS,
    REF_ARGS,
    STEP_RE,
    Event,
    Plan,
    _add_exact,
    _as_int,
    _is_num,
    _kind,
    parse_amount,
    plan,
)
from ctda.ingest.kinds import Kind

_gzip_impl: types.ModuleType
try:  # isal deflate is several times faster than zlib; the gzip output stays standard
    _gzip_impl = importlib.import_module("isal.igzip")
except ImportError:  # pragma: no cover - isal is a ctda dependency
    _gzip_impl = gzip
#: fastest level: the synthetic traces are scratch files, and they stay ~20x smaller anyway
_GZ_LEVEL = 1

__all__ = ["Plan", "ReplicateResult", "parse_amount", "plan", "replicate"]

Progress = Callable[[int, int, int], None]  # (copies written, copies total, bytes written)

_MARK_RE = re.compile(rb'"\\u0001(\d+)"')

#: id families; every value of a family in copy k is ``v + k * stride[family]``
FAMILIES = ("ts", "corr", "ext", "evidx", "py", "rf", "seq", "step")
_FAM = {name: i for i, name in enumerate(FAMILIES)}

#: ``args`` keys holding a timestamp (old Kineto runtime events)
TS_ARGS = ("external ts",)


# --- templates: one %-format text per window, holes filled per copy ---------------------
@dataclass
class Template:
    """The window's events as one ``%``-format text plus, per hole, a base and a family."""

    text: bytes
    base: list[int]
    family: list[int]
    n_events: int


class _Holes:
    """Collects the holes of one event: marker strings stand in for values until encoding."""

    def __init__(self) -> None:
        self.fmt: list[bytes] = []
        self.base: list[int] = []
        self.fam: list[int] = []

    def mark(self, fmt: bytes, base: int, family: str) -> str:
        self.fmt.append(fmt)
        self.base.append(base)
        self.fam.append(_FAM[family])
        return f"\x01{len(self.fmt) - 1}"


def _ts_hole(holes: _Holes, value: int | float) -> str:
    """A timestamp hole: the integer part moves, a float's fraction is kept verbatim."""
    if isinstance(value, int):
        return holes.mark(b"%d", value, "ts")
    d = Decimal(repr(value))
    if d < 0 or not d.is_finite():
        raise ValueError(f"cannot replicate a negative or non-finite timestamp: {value!r}")
    whole = d.to_integral_value(rounding=ROUND_FLOOR)
    frac = format(d - whole, "f")  # "0.439"; "0" for an integral float
    tail = frac[1:] if frac.startswith("0.") else ".0"
    return holes.mark(b"%d" + tail.encode(), int(whole), "ts")


def _id_hole(holes: _Holes, value: object, family: str) -> object:
    """A hole for an id, keeping a digit string a string; other values stay as they are."""
    v = _as_int(value)
    if v is None:
        return value
    return holes.mark(b'"%d"' if isinstance(value, str) else b"%d", v, family)


def _event_template(e: Event, p: Plan, holes: _Holes) -> Event:
    """A copy of ``e`` whose shifting values are replaced by hole markers."""
    out = dict(e)
    out["ts"] = _ts_hole(holes, e["ts"])
    if e.get("ph") in _FLOW_PH and "id" in e:
        out["id"] = _id_hole(holes, e["id"], "corr")
    m = STEP_RE.match(str(e.get("name", "")))
    if m:
        out["name"] = holes.mark(b'"ProfilerStep#%d"', int(m.group(1)), "step")
    args = e.get("args")
    if isinstance(args, dict):
        new = dict(args)
        for key, fam in ID_ARGS.items():
            if key in args:
                new[key] = _id_hole(holes, args[key], fam)
        for key, target in REF_ARGS.items():
            if key in args and _as_int(args[key]) in p.ref_targets[target]:
                new[key] = _id_hole(holes, args[key], ID_ARGS[target])
        for key in TS_ARGS:
            if _is_num(args.get(key)):
                new[key] = _ts_hole(holes, args[key])
        out["args"] = new
    return out


def build_template(events: list[Event], p: Plan) -> Template:
    """Encode the window once, with ``%d`` holes where values move from copy to copy."""
    enc = msgspec.json.Encoder()
    parts: list[bytes] = []
    base: list[int] = []
    family: list[int] = []
    for i in p.members:
        holes = _Holes()
        text = enc.encode(_event_template(events[i], p, holes)).replace(b"%", b"%%")
        order: list[int] = []

        def fill(m: re.Match[bytes], holes: _Holes = holes, order: list[int] = order) -> bytes:
            k = int(m.group(1))
            order.append(k)
            return holes.fmt[k]

        text = _MARK_RE.sub(fill, text)
        if sorted(order) != list(range(len(holes.fmt))):
            raise ValueError(f"event {int(i)}: a hole marker collided with trace text")
        parts.append(text)
        base += [holes.base[k] for k in order]
        family += [holes.fam[k] for k in order]
    return Template(b",".join(parts), base, family, len(parts))


class Renderer:
    """Renders copy ``k`` of a template: holes = base + k * stride (numpy, overflow-safe)."""

    def __init__(self, tpl: Template, strides: dict[str, int], max_copies: int) -> None:
        self.text = tpl.text
        stride_of = [strides.get(f, 0) for f in FAMILIES]
        step = [stride_of[f] for f in tpl.family]
        bound = max((abs(b) for b in tpl.base), default=0) + max_copies * max(step, default=0)
        # ids near 2**63 occur in real traces; fall back to Python ints rather than wrap
        dtype: type = np.int64 if bound < 2**62 else object
        self.base: npt.NDArray[Any] = np.array(tpl.base, dtype=dtype)
        self.step: npt.NDArray[Any] = np.array(step, dtype=dtype)

    def render(self, k: int) -> bytes:
        return self.text % tuple((self.base + self.step * k).tolist())


# --- the original events, adjusted around the copies -----------------------------------
def adjust_original(events: list[Event], p: Plan, copies: int) -> None:
    """Make room for the copies: move what follows the window, stretch what encloses it."""
    if copies == 0:
        return
    delta = copies * p.shift_us
    is_member = np.zeros(len(events), dtype=bool)
    is_member[p.members] = True
    for i, e in enumerate(events):
        ts = e.get("ts")
        if is_member[i] or e.get("ph") == "M" or not _is_num(ts):
            continue
        if ts >= p.hi and _kind(e) != Kind.TRACE_SPAN:
            e["ts"] = _add_exact(ts, delta)
            args = e.get("args")
            if isinstance(args, dict):
                for key in TS_ARGS:
                    if _is_num(args.get(key)):
                        args[key] = _add_exact(args[key], delta)
        elif e.get("ph") == "X" and _is_num(e.get("dur")) and _encloses(e, p):
            e["dur"] = _add_exact(e["dur"], delta)


def _encloses(e: Event, p: Plan) -> bool:
    """An event spanning the whole window; the profiler's own span always covers the session."""
    if _kind(e) == Kind.TRACE_SPAN:
        return True
    return bool(e["ts"] <= p.lo and e["ts"] + e["dur"] >= p.hi)


# --- output -----------------------------------------------------------------------------
@dataclass
class ReplicateResult:
    """What :func:`replicate` wrote."""

    out: Path
    n_source_events: int
    n_window_events: int
    copies: int
    n_events: int
    n_bytes: int  #: uncompressed JSON bytes
    shift_us: int
    step_based: bool
    seconds: float
    members: npt.NDArray[np.int64] = field(repr=False)


class _Counter:
    """Write-through wrapper that counts uncompressed bytes."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.n = 0

    def write(self, data: bytes) -> None:
        self.fh.write(data)
        self.n += len(data)


@contextmanager
def _open_out(path: Path) -> Iterator[_Counter]:
    if path.name.endswith(".gz"):
        with _gzip_impl.open(path, "wb", compresslevel=_GZ_LEVEL) as fh:
            yield _Counter(fh)
    else:
        with path.open("wb", buffering=8 << 20) as fh:
            yield _Counter(fh)


def load(path: Path) -> tuple[dict[str, Any] | None, list[Event]]:
    """The document (None for a bare-list trace) and its event list."""
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    with _gzip_impl.open(path, "rb") if gz else path.open("rb") as fh:
        doc = msgspec.json.decode(fh.read())
    if isinstance(doc, list):
        return None, doc
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: not a Kineto trace (no traceEvents array)")
    return doc, doc["traceEvents"]


def _copies_needed(
    n_events: int, n_window: int, base_bytes: int, copy_bytes: int, events: int | None, nbytes: int | None
) -> int:
    """Copies that reach both targets; later copies are never shorter than the first."""
    need = 0
    if events is not None:
        need = max(need, math.ceil(max(0, events - n_events) / n_window))
    if nbytes is not None:
        need = max(need, math.ceil(max(0, nbytes - base_bytes) / copy_bytes))
    return need


def replicate(
    src: str | Path,
    out: str | Path,
    *,
    copies: int | None = None,
    events: int | None = None,
    nbytes: int | None = None,
    progress: Progress | None = None,
    shift_us: int | None = None,
) -> ReplicateResult:
    """Write ``out``: ``src`` followed by window copies (a fixed number or up to a target).

    ``events``/``nbytes`` are minimums (both may be given); ``copies`` is exact.
    """
    t0 = time.perf_counter()
    src, out = Path(src), Path(out)
    doc, evs = load(src)
    p = plan(evs, shift_us)
    tpl = build_template(evs, p)
    n_src = len(evs)
    first = Renderer(tpl, p.strides, 1).render(1)
    head, tail = _framing(doc)
    if copies is None:
        if events is None and nbytes is None:
            raise ValueError("give copies, events or nbytes")
        # original events' size is only known after adjusting; the source text is a bound
        base_est = len(head) + len(tail) + len(msgspec.json.encode(evs))
        copies = _copies_needed(n_src, tpl.n_events, base_est, len(first) + 1, events, nbytes)
    adjust_original(evs, p, copies)
    renderer = Renderer(tpl, p.strides, copies)
    with _open_out(out) as fh:
        fh.write(head)
        body = msgspec.json.encode(evs)
        del evs[:]  # the source events are no longer needed: free them before the copies
        fh.write(body[:-1])
        del body
        for k in range(1, copies + 1):
            fh.write(b",")
            fh.write(renderer.render(k))
            if progress is not None:
                progress(k, copies, fh.n)
        fh.write(b"]")
        fh.write(tail)
        written = fh.n
    return ReplicateResult(
        out=out,
        n_source_events=n_src,
        n_window_events=tpl.n_events,
        copies=copies,
        n_events=n_src + copies * tpl.n_events,
        n_bytes=written,
        shift_us=p.shift_us,
        step_based=p.step_based,
        seconds=time.perf_counter() - t0,
        members=p.members,
    )


def _framing(doc: dict[str, Any] | None) -> tuple[bytes, bytes]:
    """Document text before and after the event array's ``[...]``, keys in source order."""
    if doc is None:
        return b"", b""
    keys = list(doc)
    at = keys.index("traceEvents")

    def members(ks: list[str]) -> list[bytes]:
        return [msgspec.json.encode(k) + b":" + msgspec.json.encode(doc[k]) for k in ks]

    before, after = members(keys[:at]), members(keys[at + 1 :])
    head = b"{" + b"".join(m + b"," for m in before) + b'"traceEvents":'
    tail = b"".join(b"," + m for m in after) + b"}"
    return head, tail


# --- CLI ----------------------------------------------------------------------------------
def _printer(every_s: float = 1.0) -> Progress:
    last = [0.0]

    def show(k: int, total: int, nbytes: int) -> None:
        now = time.perf_counter()
        if k == total or now - last[0] >= every_s:
            last[0] = now
            print(f"  copy {k}/{total}  {nbytes / 1e6:,.0f} MB", file=sys.stderr, flush=True)

    return show


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.replicate SRC OUT (--events N | --bytes SIZE | --copies N)``."""
    ap = argparse.ArgumentParser(prog="python -m bench.replicate", description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="real Kineto trace (.json or .json.gz)")
    ap.add_argument("out", type=Path, help="output trace; gzip when the name ends with .gz")
    ap.add_argument("--events", type=parse_amount, help="replicate until >= this many events (1e6, 1M)")
    ap.add_argument("--bytes", dest="nbytes", type=parse_amount, help="until >= this much JSON (1G, 1GiB)")
    ap.add_argument("--copies", type=int, help="exactly this many extra copies of the window")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.copies is None and a.events is None and a.nbytes is None:
        ap.error("one of --events, --bytes or --copies is required")
    r = replicate(
        a.src,
        a.out,
        copies=a.copies,
        events=a.events,
        nbytes=a.nbytes,
        progress=None if a.quiet else _printer(),
    )
    mode = "ProfilerStep window" if r.step_based else "whole trace"
    print(
        f"{r.out}: {r.n_events:,} events, {r.n_bytes / 1e6:,.1f} MB JSON "
        f"({r.n_source_events:,} source + {r.copies} x {r.n_window_events:,} {mode}, "
        f"shift {r.shift_us:,} us) in {r.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
