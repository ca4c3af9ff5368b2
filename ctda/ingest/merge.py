"""Stage: one host's processes as one trace (the training process and its helper processes).

A PyTorch profiler trace holds one process. Work in other processes of the same host (a
multi-process DataLoader's workers, a preprocessing service) competes for the host's cores
but is invisible to the model, so a what-if that makes that work cheaper cannot give the
training threads their cores back (docs/whatif-accuracy.md). Profiling each helper process
too and merging the traces makes that load visible: the helpers become more threads of the
host, which the CPU contention model counts like any other.

Contract of :func:`merge_processes`: the output is the main trace's document with the
helpers' events inserted at the start of its event array. The main trace is streamed (it
may be large); helpers are read whole (a DataLoader worker's trace is small). Nothing is
written unless every check passes:

- every helper is a Kineto/Chrome trace object with a ``traceEvents`` array;
- helpers hold CPU events only (GPU work and CUDA calls would need their device timelines
  joined too, which this stage does not do);
- no process id appears in two inputs (the same process given twice);
- the host names agree where recorded (only processes of one host share its clock);
- each helper overlaps the main trace in time (a helper of another run is refused).

Helper timestamps are moved onto the main trace's time base when both record
``baseTimeNanoseconds``; flow ids of helpers are offset so they cannot pair with the main
trace's flows.
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ctda.ingest.errors import TraceError
from ctda.ingest.kinds import GPU_KINDS, Kind, kind_of
from ctda.ingest.source import READ_BLOCK, find_array_start, open_stream

#: helper events of these kinds need a device timeline (or launch onto one): refused
DEVICE_KINDS = GPU_KINDS | {Kind.RUNTIME, Kind.DRIVER}
#: flow ids of the k-th helper are moved by (k + 1) * FLOW_ID_STRIDE
FLOW_ID_STRIDE = 1 << 40
_FLOW_PHASES = frozenset({"s", "t", "f"})
_PID = re.compile(rb'"pid"\s*:\s*(-?\d+)')
_TS = re.compile(rb'"ts"\s*:\s*(-?\d+(?:\.\d*)?)')
_META_KEYS = (b'"baseTimeNanoseconds"', b'"host_name"')
_ARRAY_KEY = re.compile(rb'"traceEvents"\s*:\s*$')


@dataclass
class Helper:
    """One helper trace, read and checked."""

    path: Path
    events: list[dict[str, Any]]
    pids: set[int]
    first_us: float
    last_us: float


@dataclass
class MergeSummary:
    """What :func:`merge_processes` wrote."""

    out: Path
    main_pids: set[int]
    helper_pids: dict[str, set[int]] = field(default_factory=dict)
    helper_events: int = 0


def _read_helper(path: Path, k: int, main_base: int | None, main_host: str | None) -> Helper:
    with open_stream(path) as fh:
        raw = _read(path, fh, -1)
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(path, "no traceEvents array (not a Chrome/Kineto trace)")
    host = doc.get("host_name")
    if main_host and isinstance(host, str) and host and host != main_host:
        raise TraceError(
            path,
            f"recorded on host {host!r}, the main trace on {main_host!r}: only processes of one "
            "host share its clock and cores",
        )
    base = doc.get("baseTimeNanoseconds")
    shift = (int(base) - main_base) / 1e3 if isinstance(base, int) and main_base is not None else 0.0
    events: list[dict[str, Any]] = []
    pids: set[int] = set()
    first, last = float("inf"), float("-inf")
    for ev in doc["traceEvents"]:
        if not isinstance(ev, dict):
            continue
        cat = ev.get("cat")
        if isinstance(cat, str) and kind_of(str(ev.get("ph") or ""), cat) in DEVICE_KINDS:
            raise TraceError(
                path,
                f"holds GPU events (category {cat!r}): only CPU processes such as DataLoader "
                "workers can be merged beside the main trace",
            )
        ts = ev.get("ts")
        if isinstance(ts, (int, float)):
            if shift:
                ev["ts"] = ts = ts + shift
            if ev.get("ph") == "X":
                first, last = min(first, ts), max(last, ts + float(ev.get("dur") or 0))
        if ev.get("ph") in _FLOW_PHASES and isinstance(ev.get("id"), int):
            ev["id"] += (k + 1) * FLOW_ID_STRIDE
        pid = ev.get("pid")
        if isinstance(pid, int) and ev.get("ph") == "X":
            pids.add(pid)
        events.append(ev)
    if not pids:
        raise TraceError(path, "holds no complete events (nothing ran in it)")
    return Helper(path, events, pids, first, last)


def _head_meta(head: bytes) -> tuple[int | None, str | None]:
    """``baseTimeNanoseconds`` and ``host_name`` from the text before the event array."""
    text = _ARRAY_KEY.sub(b"", head.rstrip()).rstrip().rstrip(b",") + b"}"
    if not any(k in text for k in _META_KEYS):
        return None, None
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None, None  # keys after the array, or an unusual head: no time base to use
    base, host = doc.get("baseTimeNanoseconds"), doc.get("host_name")
    return (base if isinstance(base, int) else None), (host if isinstance(host, str) and host else None)


def merge_processes(main: Path, helpers: list[Path], out: Path) -> MergeSummary:
    """Write ``out``: ``main`` with the events of ``helpers`` (see the module's contract)."""
    if not helpers:
        raise TraceError(main, "no helper traces to merge beside it")
    if out.resolve() in {p.resolve() for p in [main, *helpers]}:
        raise TraceError(out, "is one of the inputs; write the merged trace to a new file")
    with open_stream(main) as fh:
        buf = b""
        found = None
        while found is None:
            block = _read(main, fh)
            buf += block
            found = find_array_start(main, buf, at_eof=not block)
        framing, at = found
        if framing.bare_list:
            raise TraceError(main, "is a bare event list: no trace object to hold the host's processes")
        base, host = _head_meta(framing.head)
        read = [_read_helper(p, k, base, host) for k, p in enumerate(helpers)]
        inserted = b",".join(msgspec.json.encode(ev) for h in read for ev in h.events)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        main_pids: set[int] = set()
        first, last = float("inf"), float("-inf")
        try:
            with _open_out(tmp, out) as dst:
                dst.write(buf[: at + 1])
                rest = buf[at + 1 :]
                while not rest.strip():  # whether the main array is empty decides the comma
                    block = _read(main, fh)
                    if not block:
                        break
                    rest += block
                dst.write(inserted)
                if rest.lstrip()[:1] != b"]":
                    dst.write(b",")
                tail = b""
                chunk = rest
                while chunk:
                    scan = tail + chunk  # a key split across two blocks is seen whole here
                    # parsed by NumPy, not one Python int/float per event: the main trace may be large
                    main_pids.update(np.unique(np.array(_PID.findall(scan)).astype(np.int64)).tolist())
                    stamps = np.array(_TS.findall(scan)).astype(np.float64)
                    if len(stamps):
                        first, last = min(first, float(stamps.min())), max(last, float(stamps.max()))
                    tail = chunk[-64:]
                    dst.write(chunk)
                    chunk = _read(main, fh)
            _check(main, read, main_pids, first, last)
            os.replace(tmp, out)
        except OSError as exc:  # reads go through _read, which names the main trace
            tmp.unlink(missing_ok=True)
            raise TraceError(out, f"cannot write ({exc.strerror or exc})") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    summary = MergeSummary(out, main_pids)
    for h in read:
        summary.helper_pids[str(h.path)] = h.pids
        summary.helper_events += len(h.events)
    return summary


def _check(main: Path, helpers: list[Helper], main_pids: set[int], first: float, last: float) -> None:
    seen: dict[int, Path] = {p: main for p in main_pids}
    for h in helpers:
        for pid in sorted(h.pids):
            if pid in seen:
                raise TraceError(
                    h.path, f"process {pid} is also in {seen[pid]}: the same process given twice"
                )
        seen.update({p: h.path for p in h.pids})
        if h.last_us < first or h.first_us > last:
            raise TraceError(
                h.path,
                "does not overlap the main trace in time: it was recorded in another run or on another clock",
            )


def _read(path: Path, fh: Any, size: int = READ_BLOCK) -> bytes:
    try:
        return fh.read(size)  # type: ignore[no-any-return]
    except (OSError, EOFError) as exc:
        raise TraceError(path, f"cannot read to the end ({exc})") from None


def _open_out(tmp: Path, out: Path) -> Any:
    if out.name.endswith(".gz"):
        return gzip.open(tmp, "wb", compresslevel=6)
    return tmp.open("wb")
