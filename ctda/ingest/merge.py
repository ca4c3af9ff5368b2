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

The main trace and every helper are read under the reader's limits
(:mod:`ctda.ingest.limits`: regular files only, decompressed size, expansion, longest event,
nesting); a helper is held in memory as Python objects, so it is also capped at
``Limits.max_helper_bytes``. The top-level metadata (``host_name``, ``baseTimeNanoseconds``)
is read wherever it sits in each file: Kineto writes it after the event array, so the main
trace is read through once (decoded, nothing kept) before anything is written.

Helper timestamps are moved onto the main trace's time base when both record
``baseTimeNanoseconds`` (one recording it and the other not is refused: their clocks cannot
be related); flow ids of helpers are offset so they cannot pair with the main trace's
flows. The output (``-o``) must be a regular file or a new path, never an input, and is
written atomically (:mod:`ctda.ingest.outfile`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np

from ctda.ingest.chunks import Chunker
from ctda.ingest.decode import TOO_DEEP
from ctda.ingest.errors import TraceError
from ctda.ingest.kinds import GPU_KINDS, Kind, kind_of
from ctda.ingest.limits import Limits, check_regular, human
from ctda.ingest.outfile import atomic_output, check_output
from ctda.ingest.pipeline import decode_pieces
from ctda.ingest.reader import read_document_meta
from ctda.ingest.source import READ_BLOCK, compressed_position, find_array_start, open_stream, read_blocks
from ctda.ingest.table import TraceMeta

#: helper events of these kinds need a device timeline (or launch onto one): refused
DEVICE_KINDS = GPU_KINDS | {Kind.RUNTIME, Kind.DRIVER}
#: flow ids of the k-th helper are moved by (k + 1) * FLOW_ID_STRIDE
FLOW_ID_STRIDE = 1 << 40
_FLOW_PHASES = frozenset({"s", "t", "f"})
#: at most 18 digits: always an int64 (a longer number is not a process id ctda matches)
_PID = re.compile(rb'"pid"\s*:\s*(-?\d{1,18})(?![\d.eE])')
_TS = re.compile(rb'"ts"\s*:\s*(-?\d+(?:\.\d*)?)')


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


def main_meta(path: Path, limits: Limits) -> TraceMeta:
    """The main trace's top-level metadata, wherever it sits; the whole file is read and
    its events checked as the reader checks them (nothing is kept)."""
    check_regular(path)
    chunker = Chunker(path, limits=limits)
    _, tail = decode_pieces(chunker, keep=False)
    assert chunker.framing is not None  # set before the last piece is produced
    chunker.framing.tail = tail
    meta = TraceMeta(path=str(path), n_bytes=chunker.n_bytes)
    read_document_meta(path, chunker.framing, meta)
    return meta


def helper_text(path: Path, limits: Limits) -> bytearray:
    """A helper's decompressed text, read under ``limits`` (its own size cap included)."""
    cap = min(limits.max_bytes, limits.max_helper_bytes)
    text = bytearray()  # grows in place: no second copy of the text for a join
    n = 0
    with open_stream(path) as fh:
        gz = getattr(fh, "fileobj", None) is not None
        for block in read_blocks(path, fh):
            n += len(block)
            limits.check(path, n, compressed_position(fh) if gz else None)
            if n > cap:
                raise TraceError(
                    path,
                    f"a helper trace over {human(cap)} of JSON (helpers are held in memory whole; "
                    "raise the bound with $CTDA_MAX_HELPER_BYTES)",
                )
            text += block
    return text


def _decode_helper(path: Path, raw: bytes | bytearray) -> dict[str, Any]:
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise TraceError(path, TOO_DEEP) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(path, "no traceEvents array (not a Chrome/Kineto trace)")
    return doc


def _shift_us(path: Path, doc: dict[str, Any], main: TraceMeta) -> float:
    """How far the helper's timestamps move onto the main trace's time base (µs)."""
    host = doc.get("host_name")
    if main.host_name and isinstance(host, str) and host and host != main.host_name:
        raise TraceError(
            path,
            f"recorded on host {host!r}, the main trace on {main.host_name!r}: only processes of one "
            "host share its clock and cores",
        )
    base = doc.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else None
    if (base is None) != (main.base_time_ns is None):
        which = (
            "it records baseTimeNanoseconds and the main trace does not"
            if base is not None
            else ("the main trace records baseTimeNanoseconds and it does not")
        )
        raise TraceError(path, f"{which}: the two clocks cannot be put on one time base")
    return (base - main.base_time_ns) / 1e3 if base is not None and main.base_time_ns is not None else 0.0


def _read_helper(path: Path, k: int, main: TraceMeta, limits: Limits) -> Helper:
    doc = _decode_helper(path, helper_text(path, limits))
    shift = _shift_us(path, doc, main)
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
                dur = ev.get("dur")
                first, last = min(first, ts), max(last, ts + (dur if isinstance(dur, (int, float)) else 0))
        if ev.get("ph") in _FLOW_PHASES and isinstance(ev.get("id"), int):
            ev["id"] += (k + 1) * FLOW_ID_STRIDE
        pid = ev.get("pid")
        if isinstance(pid, int) and ev.get("ph") == "X":
            pids.add(pid)
        events.append(ev)
    if not pids:
        raise TraceError(path, "holds no complete events (nothing ran in it)")
    return Helper(path, events, pids, first, last)


def merge_processes(main: Path, helpers: list[Path], out: Path, limits: Limits | None = None) -> MergeSummary:
    """Write ``out``: ``main`` with the events of ``helpers`` (see the module's contract)."""
    limits = limits if limits is not None else Limits.from_env()
    if not helpers:
        raise TraceError(main, "no helper traces to merge beside it")
    check_output(out, [main, *helpers])
    meta = main_meta(main, limits)
    if meta.bare_list:
        raise TraceError(main, "is a bare event list: no trace object to hold the host's processes")
    read = [_read_helper(p, k, meta, limits) for k, p in enumerate(helpers)]
    inserted = b",".join(msgspec.json.encode(ev) for h in read for ev in h.events)
    with atomic_output(out) as dst:
        main_pids, first, last = _copy_main(main, inserted, dst, limits)
        _check(main, read, main_pids, first, last)
    summary = MergeSummary(out, main_pids)
    for h in read:
        summary.helper_pids[str(h.path)] = h.pids
        summary.helper_events += len(h.events)
    return summary


class _MainReader:
    """The main trace's decompressed blocks, under the limits again (it is read twice and
    may have changed in between)."""

    def __init__(self, path: Path, fh: Any, limits: Limits) -> None:
        self.path, self.fh, self.limits = path, fh, limits
        self.gz = getattr(fh, "fileobj", None) is not None
        self.n = 0

    def read(self) -> bytes:
        try:
            block: bytes = self.fh.read(READ_BLOCK)
        except (OSError, EOFError) as exc:
            raise TraceError(self.path, f"cannot read to the end ({exc})") from None
        self.n += len(block)
        self.limits.check(self.path, self.n, compressed_position(self.fh) if self.gz else None)
        return block


def _copy_main(main: Path, inserted: bytes, dst: IO[bytes], limits: Limits) -> tuple[set[int], float, float]:
    """Stream ``main`` into ``dst`` with ``inserted`` at the start of its event array; the
    main trace's process ids and its first and last timestamp (µs)."""
    main_pids: set[int] = set()
    first, last = float("inf"), float("-inf")
    with open_stream(main) as fh:
        src = _MainReader(main, fh, limits)
        buf = b""
        found = None
        while found is None:
            block = src.read()
            buf += block
            found = find_array_start(main, buf, at_eof=not block)
            if found is None:
                limits.check_unbroken(main, len(buf), "before the event array")
        framing, at = found
        if framing.bare_list:
            raise TraceError(main, "is a bare event list: no trace object to hold the host's processes")
        dst.write(buf[: at + 1])
        rest = buf[at + 1 :]
        while not rest.strip():  # whether the main array is empty decides the comma
            block = src.read()
            if not block:
                break
            rest += block
            limits.check_unbroken(main, len(rest), "at the start of the event array")
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
            chunk = src.read()
    return main_pids, first, last


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
