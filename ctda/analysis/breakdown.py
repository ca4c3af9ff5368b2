"""Breakdowns of device time that HolisticTraceAnalysis users know, tied to the critical path.

Each breakdown is one function of an :class:`~ctda.analysis.engine.Analysis` returning one
DataFrame, per analysis window (step) and device, plus a whole-trace row (``window`` -1)
whose span is HTA's: first device work start to last device work end. The definitions,
and where they follow or leave HTA's, are in docs/breakdowns.md.

Device work is kernels, memory copies and memsets (what the trace's GPU lanes execute);
GPU-side annotations and sync records are not work, although HTA counts them as busy.
Everything is vectorised: intervals are merged by sorting once per (window, device).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import pandas as pd

from ctda.analysis.classify import CLASS_CODE
from ctda.analysis.engine import Analysis
from ctda.analysis.tables import Windows
from ctda.ingest.columns import NA
from ctda.ingest.kinds import GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.npx import run_starts

I64 = npt.NDArray[np.int64]

KERNEL_CLASSES = ("compute", "communication", "memory")
COMPUTE, COMMUNICATION, MEMORY = range(3)
#: HTA 0.5's kernel-name patterns (hta/common/types.py): memory by name as well as by kind
MEMORY_NAME = r"^(?:hip)?Memcpy|^(?:hip)?Memset|^dma"
COMM_NAME = r"^(?:nccl|rccl)"
#: names HTA counts as neither compute nor communication
HTA_NOT_COMPUTE = r"^nccl|Memcpy|Memset|dma|^.*Sync|cuda.*LaunchKernel|^runFunction"
#: HTA's default ``consecutive_kernel_delay``: a shorter same-stream gap is "kernel wait"
KERNEL_WAIT_NS = 30_000
IDLE_KINDS = ("host_wait", "kernel_wait", "other")
#: bound-by classes of the path's waits that are device idle time
IDLE_CLASSES = ("gpu_gap", "launch_overhead")
TRACE = -1  # ``window`` of the whole-trace rows


def union_ns(ts: I64, end: I64) -> int:
    """Length of the union of intervals ``[ts, end)`` (any order, overlaps allowed)."""
    if len(ts) == 0:
        return 0
    order = np.argsort(ts, kind="stable")
    s, e = ts[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    starts = np.flatnonzero(new)
    group_end = np.maximum.reduceat(e, starts)
    return int(np.sum(np.maximum(group_end - s[starts], 0)))


@dataclass
class Device:
    """The analysed events that are device work, with their class, device and stream."""

    a: Analysis
    #: HTA's conventions instead of ctda's, to compare figures with HTA's (docs/breakdowns.md):
    #: classes come from names alone (HTA's "other" names count with memory), and a trace
    #: with sub-microsecond times has each interval rounded inward to whole microseconds
    hta: bool = False

    @cached_property
    def idx(self) -> I64:
        """Analysed indices of device work, by start time."""
        n = self.a.nodes
        sel = np.flatnonzero(in_kinds(n.kind, GPU_WORK_KINDS))
        return sel[np.argsort(n.ts[sel], kind="stable")]

    @cached_property
    def _whole_us(self) -> bool:
        return self.hta and bool(np.any(self.a.nodes.ts % 1000))

    @cached_property
    def cls(self) -> npt.NDArray[np.int8]:
        t, n = self.a.table, self.a.nodes
        names = pd.Series(t.strings("name"), dtype=object).astype(str)
        mem_name = names.str.contains(MEMORY_NAME, regex=True).to_numpy()
        comm_name = names.str.contains(COMM_NAME, regex=True).to_numpy()
        code = t.col("name")[n.uid[self.idx]].astype(np.int64)
        kind = n.kind[self.idx]
        out = np.full(len(self.idx), COMPUTE, dtype=np.int8)
        out[comm_name[code]] = COMMUNICATION
        if self.hta:
            other = names.str.contains(HTA_NOT_COMPUTE, regex=True).to_numpy()
            out[other[code] & ~comm_name[code]] = MEMORY
            out[mem_name[code]] = MEMORY
        else:
            out[mem_name[code] | (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)] = MEMORY
        return out

    @cached_property
    def lane(self) -> npt.NDArray[np.int32]:
        return self.a.nodes.lane[self.idx]

    @cached_property
    def device(self) -> I64:
        if self.hta:  # HTA's figures are per rank
            return np.zeros(len(self.idx), dtype=np.int64)
        lanes = self.a.table.lanes
        dev = np.asarray(lanes["device"].to_numpy(), dtype=np.int64)
        return dev[self.lane]

    @cached_property
    def ts(self) -> I64:
        ts = self.a.nodes.ts[self.idx]
        return -(-ts // 1000) * 1000 if self._whole_us else ts

    @cached_property
    def end(self) -> I64:
        end = self.a.nodes.end[self.idx]
        return np.maximum(end // 1000 * 1000, self.ts) if self._whole_us else end

    @property
    def any(self) -> bool:
        return len(self.idx) > 0


def spans(a: Analysis, dev: Device) -> list[tuple[int, str, int | None, int, int]]:
    """(window, label, step, start, end) of every window, then the whole trace."""
    starts, ends = a.window_bounds()
    out = [(k, w.label, w.step, int(starts[k]), int(ends[k])) for k, w in enumerate(a.windows)]
    if dev.any:
        out.append((TRACE, "(trace)", None, int(dev.ts.min()), int(dev.end.max())))
    return out


def temporal(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Per window and device: compute, communication (not under compute), memory (under
    neither) and idle time, each in ns and as a share of the window.

    Overlap goes to the first class in that order, so the four add up to the window.
    """
    dev = dev or Device(a)
    rows = []
    per_device = by_device(dev)
    for k, label, step, s, e in spans(a, dev):
        for d, work in per_device:
            ts, en, c = work.clipped(s, e)
            comp = union_ns(ts[c == COMPUTE], en[c == COMPUTE])
            comp_comm = union_ns(ts[c != MEMORY], en[c != MEMORY])
            busy = union_ns(ts, en)
            span = e - s
            rows.append(
                {
                    "window": k,
                    "label": label,
                    "step": step,
                    "device": int(d),
                    "span_ns": span,
                    "compute_ns": comp,
                    "communication_ns": comp_comm - comp,
                    "memory_ns": busy - comp_comm,
                    "idle_ns": span - busy,
                }
            )
    out = pd.DataFrame(rows, columns=_TEMPORAL)
    for col in ("compute", "communication", "memory", "idle"):
        out[f"{col}_share"] = out[f"{col}_ns"] / out["span_ns"].where(out["span_ns"] > 0, 1)
    return out


@dataclass
class DeviceWork:
    """One device's work by start: starts, ends, the running latest end, classes."""

    ts: I64
    end: I64
    reach: I64
    cls: npt.NDArray[np.int8]

    def clipped(self, s: int, e: int) -> tuple[I64, I64, npt.NDArray[np.int8]]:
        """The work open in ``[s, e)``, clipped to it, and its classes: started before ``e``
        (a prefix by start), ended after ``s`` (none before the first whose running latest
        end passes ``s``), found by binary search rather than a pass over all the work."""
        part = slice(int(np.searchsorted(self.reach, s, "right")), int(np.searchsorted(self.ts, e, "left")))
        sel = self.end[part] > s
        return np.maximum(self.ts[part][sel], s), np.minimum(self.end[part][sel], e), self.cls[part][sel]


def by_device(dev: Device) -> list[tuple[int, DeviceWork]]:
    """Per device (ascending), its work (``dev`` is in start order already; a stable sort by
    device keeps it)."""
    order = np.argsort(dev.device, kind="stable")
    device = dev.device[order]
    cut = run_starts(device)
    out = []
    for lo, hi in zip(cut, np.r_[cut[1:], len(order)]):
        rows = order[lo:hi]
        end = dev.end[rows]
        work = DeviceWork(dev.ts[rows], end, np.maximum.accumulate(end), dev.cls[rows])
        out.append((int(device[lo]), work))
    return out


_TEMPORAL = [
    "window",
    "label",
    "step",
    "device",
    "span_ns",
    "compute_ns",
    "communication_ns",
    "memory_ns",
    "idle_ns",
]


def cp_ns_by_event(a: Analysis) -> I64:
    """Critical-path time charged to each analysed event (its own time, not waits), all windows."""
    ch = a.charges
    own = ch[ch.event >= 0]
    return np.bincount(own.event.to_numpy(), weights=own.ns.to_numpy(), minlength=a.nodes.n).astype(np.int64)


def kernels(a: Analysis, dev: Device | None = None) -> pd.DataFrame:
    """Per kernel name: class, count, total/mean/p50/p95 duration and critical-path time,
    over the whole trace; largest total first."""
    dev = dev or Device(a)
    if not dev.any:
        return pd.DataFrame(columns=_KERNELS)
    t = a.table
    code = t.col("name")[a.nodes.uid[dev.idx]].astype(np.int64)
    df = pd.DataFrame(
        {
            "code": code,
            "class": np.asarray(KERNEL_CLASSES)[dev.cls],
            "dur": dev.end - dev.ts,
            "cp": cp_ns_by_event(a)[dev.idx],
        }
    )
    g = df.groupby(["code", "class"], sort=False)
    out = g.agg(
        count=("dur", "size"),
        total_ns=("dur", "sum"),
        mean_ns=("dur", "mean"),
        p50_ns=("dur", "median"),
        p95_ns=("dur", lambda x: float(np.percentile(x, 95))),
        cp_ns=("cp", "sum"),
    ).reset_index()
    out.insert(0, "name", np.asarray(t.strings("name"), dtype=object)[out.pop("code").to_numpy()])
    return out.sort_values(["total_ns", "name"], ascending=[False, True], ignore_index=True)[_KERNELS]


_KERNELS = ["name", "class", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "cp_ns"]


def kernel_classes(a: Analysis, dev: Device | None = None, k: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per kernel class: count, total time, share of device time, critical-path time
    (from ``k``, :func:`kernels`' table, when it is at hand)."""
    k = kernels(a, dev) if k is None else k
    out = k.groupby("class").agg(count=("count", "sum"), total_ns=("total_ns", "sum"), cp_ns=("cp_ns", "sum"))
    out = out.reindex(KERNEL_CLASSES, fill_value=0).reset_index()
    total = out.total_ns.sum()
    out["share"] = out.total_ns / (total if total else 1)
    return out[["class", "count", "total_ns", "share", "cp_ns"]]


def idle(a: Analysis, dev: Device | None = None, kernel_wait_ns: int = KERNEL_WAIT_NS) -> pd.DataFrame:
    """Per window and stream, then per stream over the whole trace (``window`` -1): the idle
    time before each piece of work, split as HTA does into host wait (its launch came after
    the stream went idle), kernel wait (a gap shorter than ``kernel_wait_ns``) and other,
    with the critical path's waits that end at that work (``cp_ns``).

    A gap belongs to the work that ends it; in a window it starts no earlier than the
    window. ``cp_ns`` sums the path's device-idle waits (the bound-by classes in
    :data:`IDLE_CLASSES`), so per window it equals those classes of the step's path.
    """
    dev = dev or Device(a)
    cols = ["window", "label", "device", "stream", "idle", "idle_ns", "cp_ns"]
    if not dev.any:
        return pd.DataFrame(columns=cols)
    n = a.nodes
    order = np.lexsort((dev.ts, dev.lane))
    idx, lane, ts, en = dev.idx[order], dev.lane[order], dev.ts[order], dev.end[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = lane[1:] != lane[:-1]
    prev_end = _prev_end_per_lane(en, first)
    launcher = a.table.col("launcher")[n.uid[idx]]
    launch_idx = np.where(launcher >= 0, n.index_of_uid[np.maximum(launcher, 0)], -1)
    launch_ts = np.where(launch_idx >= 0, n.ts[np.maximum(launch_idx, 0)], np.iinfo(np.int64).min)
    gap = np.where(first, 0, np.maximum(ts - prev_end, 0))
    cat = np.where(launch_ts > prev_end, 0, np.where(gap < kernel_wait_ns, 1, 2))
    cp = _idle_on_path(a, idx)
    win = Windows(a).of_event[idx]
    w_start = a.window_bounds()[0]
    in_win = win >= 0
    from_ = np.maximum(prev_end, np.where(in_win, w_start[np.maximum(win, 0)], 0))
    w_gap = np.where(in_win, np.maximum(ts - from_, 0), 0)
    frames = [
        pd.DataFrame({"window": win, "lane": lane, "cat": cat, "gap": w_gap, "cp": cp})[in_win],
        pd.DataFrame({"window": TRACE, "lane": lane, "cat": cat, "gap": gap, "cp": cp}),
    ]
    g = pd.concat(frames).groupby(["window", "lane", "cat"]).agg(idle_ns=("gap", "sum"), cp_ns=("cp", "sum"))
    g = g.reset_index()
    g = g[(g.idle_ns > 0) | (g.cp_ns > 0)]
    lanes = a.table.lanes
    labels = np.asarray([w.label for w in a.windows] + ["(trace)"], dtype=object)
    out = pd.DataFrame(
        {
            "window": g.window.to_numpy(),
            "label": labels[g.window.to_numpy()],  # -1 reads "(trace)"
            "device": lanes["device"].to_numpy()[g.lane.to_numpy()].astype(np.int64),
            "stream": lanes["stream"].to_numpy()[g.lane.to_numpy()].astype(np.int64),
            "idle": np.asarray(IDLE_KINDS, dtype=object)[g.cat.to_numpy()],
            "idle_ns": g.idle_ns.to_numpy(),
            "cp_ns": g.cp_ns.to_numpy(),
        }
    )
    trace_last = out.window.to_numpy() == TRACE
    return pd.concat([out[~trace_last], out[trace_last]], ignore_index=True)[cols]


def _prev_end_per_lane(end: I64, first: npt.NDArray[np.bool_]) -> I64:
    """For work sorted by (stream, start): the latest end of the earlier work on its stream."""
    lo = np.iinfo(np.int64).min
    seg = np.cumsum(first) - 1
    # offset each stream's ends so one running maximum over all never crosses streams
    span = int(end.max() - end.min()) + 1 if len(end) else 1
    shifted = (end - end.min()) + seg.astype(np.int64) * span
    run = np.maximum.accumulate(shifted) - seg.astype(np.int64) * span + end.min()
    out = np.r_[lo, run[:-1]]
    out[first] = lo
    return out


def _idle_on_path(a: Analysis, idx: I64) -> I64:
    """Critical-path wait time that ends at each of ``idx``'s starts and is device idle."""
    ch, g = a.charges, a.graph
    codes = [CLASS_CODE[c] for c in IDLE_CLASSES]
    waits = ch[(ch.event < 0) & ch.cls.isin(codes)]
    waiting = g.dst[waits.edge.to_numpy()] // 2
    per_event = np.zeros(a.nodes.n + 2, dtype=np.int64)
    np.add.at(per_event, np.minimum(waiting, a.nodes.n + 1), waits.ns.to_numpy())
    return per_event[idx]


def on_path_idle_by_window(a: Analysis) -> I64:
    """Per window: the critical path's device-idle classes (what ``idle``'s cp_ns sums to)."""
    ch = a.charges
    codes = [CLASS_CODE[c] for c in IDLE_CLASSES]
    sel = ch[(ch.event < 0) & ch.cls.isin(codes)]
    return np.bincount(sel.window.to_numpy(), weights=sel.ns.to_numpy(), minlength=len(a.windows)).astype(
        np.int64
    )


def hta_differences(a: Analysis) -> dict[str, int]:
    """What in this trace makes HTA's figures differ from ctda's on purpose (event counts):

    - ``cpu_ops_with_stream``: CPU events with a ``stream`` argument, which HTA counts as
      device time (it takes every event with a stream for device work);
    - ``device_sync_records``: sync records and annotations on device lanes, busy time to HTA;
    - ``unattributed_work``: device work whose launch is not in the trace, which HTA drops
      when the trace has two or more profiler steps.
    """
    t, n = a.table, a.nodes
    stream = t.col("stream")[n.uid]
    cpu = ~n.is_gpu & (stream != NA) & (stream >= 0)
    on_device = t.lanes["is_gpu"].to_numpy()[t.col("lane")]
    kind = t.col("kind")
    records = on_device & ((kind == Kind.SYNC) | (kind == Kind.GPU_ANNOTATION))
    work = in_kinds(n.kind, GPU_WORK_KINDS)
    steps = sum(1 for w in a.windows if w.step is not None)
    unlaunched = work & (t.col("launcher")[n.uid] < 0) if steps >= 2 else np.zeros(0, dtype=bool)
    return {
        "cpu_ops_with_stream": int(cpu.sum()),
        "device_sync_records": int(records.sum()),
        "unattributed_work": int(unlaunched.sum()),
    }
