"""Stage 4: columns derived from the raw ones: lane, nesting, launcher, step; then flows.

Each function reads the raw columns it names and returns new arrays; all are vectorised.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ctda.ingest.checks import warnings_for
from ctda.ingest.flows import flow_table
from ctda.ingest.kinds import CPU_KINDS, GPU_KINDS, GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.nesting import nest
from ctda.ingest.npx import factorize, first_of_each
from ctda.ingest.table import EventTable, TraceMeta, column_array
from ctda.ingest.timestamps import NA
from ctda.threads import beside

__all__ = ["derive", "lanes", "launchers", "steps"]

STEP_PATTERN = r"^ProfilerStep#(?P<n>\d+)$"  # RE2 (Arrow) and Python re both read it
STEP_RE = re.compile(STEP_PATTERN)
_STREAM_RE = re.compile(r"^(?:stream\s*)?(-?\d+)")
I64 = npt.NDArray[np.int64]
_ALL_STREAMS_U32 = 2**32 - 1


def derive(events: pa.Table, meta: TraceMeta) -> EventTable:
    """Add lane, parent, depth, launcher and step columns; bind flows; count warnings.

    Flows are bound in a thread beside the rest: both sides are numpy-bound (the call-stack
    walk native, where built) and release the GIL for most of their time, so on two cores
    they overlap.
    """
    kind = events.column("kind").to_numpy()
    ts = events.column("ts_ns").to_numpy()
    dur = events.column("dur_ns").to_numpy()
    lane, lane_table = lanes(events, kind)
    events = events.append_column("lane", pa.array(lane))
    with_lanes = EventTable(events, lane_table, pd.DataFrame(), meta)
    bound = beside(flow_table, with_lanes)  # only that thread touches with_lanes
    cpu_rows = np.flatnonzero(in_kinds(kind, CPU_KINDS) & (lane >= 0))
    parent, depth, partial = nest(cpu_rows, lane, ts, np.where(dur == NA, 0, dur), events.num_rows)
    launcher = launchers(events, kind)
    step, _ = steps(events, kind, lane, launcher)
    flows, odd_flows = bound()
    for name, values in (("parent", parent), ("depth", depth), ("launcher", launcher), ("step", step)):
        with_lanes.events = with_lanes.events.append_column(name, pa.array(values))
    table = EventTable(events=with_lanes.events, lanes=lane_table, flows=flows, meta=meta)
    table._np.update(with_lanes._np)  # the numpy views already made stay valid
    warnings_for(table, partial, odd_flows)
    return table


def dict_parts(events: pa.Table, name: str) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Codes and dictionary values of a dictionary-encoded string column."""
    arr = column_array(events, name)
    return arr.indices.to_numpy(zero_copy_only=False), arr.dictionary.to_pylist()


def _parse_num(label: str | None) -> int:
    m = _STREAM_RE.match(label.strip()) if label else None
    return int(m.group(1)) if m else int(NA)


def _num_label(value: int) -> str:
    return "?" if value == NA else str(value)


def lanes(events: pa.Table, kind: npt.NDArray[np.int8]) -> tuple[npt.NDArray[np.int32], pd.DataFrame]:
    """Lane (CPU thread or GPU stream) of every complete event; -1 for the rest.

    CPU lanes are (pid, tid) as written. GPU lanes are (device, stream) from ``args`` when
    present, else parsed from pid/tid ("stream 7"): GPU pids are device indices that may
    equal a CPU pid, so GPU-ness comes from the category, never from the pid.
    """
    pid, pid_vals = dict_parts(events, "pid")
    tid, tid_vals = dict_parts(events, "tid")
    ph, ph_vals = dict_parts(events, "ph")
    is_x = np.array([v == "X" for v in ph_vals] or [False])[ph]
    lane = np.full(events.num_rows, -1, dtype=np.int32)
    frames = []
    rows = np.flatnonzero(in_kinds(kind, CPU_KINDS) | ((kind == Kind.OTHER) & is_x))
    if len(rows):
        ntid = max(len(tid_vals), 1)
        keys, codes = factorize(pid[rows].astype(np.int64) * ntid + tid[rows])
        lane[rows] = codes
        frames.append(
            pd.DataFrame(
                {
                    "lane": np.arange(len(keys)),
                    "is_gpu": False,
                    "pid": [pid_vals[k // ntid] for k in keys],
                    "tid": [tid_vals[k % ntid] for k in keys],
                    "device": int(NA),
                    "stream": int(NA),
                    "n_events": np.bincount(codes, minlength=len(keys)),
                }
            )
        )
    rows = np.flatnonzero(in_kinds(kind, GPU_KINDS))
    if len(rows):
        device, stream = events.column("device").to_numpy(), events.column("stream").to_numpy()
        pid_num = np.array([_parse_num(v) for v in pid_vals], dtype=np.int64)
        tid_num = np.array([_parse_num(v) for v in tid_vals], dtype=np.int64)
        dev = np.where(device[rows] != NA, device[rows], pid_num[pid[rows]])
        strm = np.where(stream[rows] != NA, stream[rows], tid_num[tid[rows]])
        # device-wide records (Context Sync) name stream -1, some CUPTI versions as uint32
        strm = np.where(strm == _ALL_STREAMS_U32, -1, strm)
        udev, dev_code = factorize(dev)
        ustrm, strm_code = factorize(strm)
        keys, codes = factorize(dev_code * len(ustrm) + strm_code)
        base = sum(len(f) for f in frames)
        lane[rows] = codes + base
        devs, strms = udev[keys // len(ustrm)], ustrm[keys % len(ustrm)]
        frames.append(
            pd.DataFrame(
                {
                    "lane": np.arange(len(keys)) + base,
                    "is_gpu": True,
                    "pid": [_num_label(d) for d in devs],
                    "tid": [f"stream {_num_label(s)}" for s in strms],
                    "device": devs,
                    "stream": strms,
                    "n_events": np.bincount(codes, minlength=len(keys)),
                }
            )
        )
    cols = ["lane", "is_gpu", "pid", "tid", "device", "stream", "n_events"]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    table["thread_name"] = _thread_names(events, table)
    return lane, table


def _thread_names(events: pa.Table, table: pd.DataFrame) -> list[str]:
    """Names from ``thread_name`` metadata events, keyed by (pid, tid) labels; the last wins."""
    name = column_array(events, "name")
    code = pc.index(name.dictionary, "thread_name").as_py()
    rows = np.flatnonzero(name.indices.to_numpy() == code) if code >= 0 else np.zeros(0, dtype=np.int64)
    if not len(rows):
        return [""] * len(table)
    pid, pid_vals = dict_parts(events, "pid")
    tid, tid_vals = dict_parts(events, "tid")
    meta, meta_vals = dict_parts(events, "meta_name")
    # one row per (pid, tid): the last one, as later metadata events override earlier ones
    keys = pid[rows].astype(np.int64) * max(len(tid_vals), 1) + tid[rows]
    _, last = first_of_each(keys[::-1])
    named = {(pid_vals[pid[r]], tid_vals[tid[r]]): meta_vals[meta[r]] or "" for r in rows[::-1][last]}
    return [named.get((p, t), "") for p, t in zip(table["pid"], table["tid"], strict=True)]


def _step_numbers(names: pa.Array) -> I64:
    """Per dictionary entry: N for ``ProfilerStep#N``, else -1 (matched in Arrow, not Python)."""
    found = pc.struct_field(pc.extract_regex(names, STEP_PATTERN), "n")
    return pc.cast(found, pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)


def steps(
    events: pa.Table, kind: npt.NDArray[np.int8], lane: npt.NDArray[np.int32], launcher: I64
) -> tuple[npt.NDArray[np.int32], pd.DataFrame]:
    """Enclosing ProfilerStep number of each event (-1 outside every step), and the steps.

    CPU events take the step whose CPU span contains their start, on any thread; device
    work takes its launcher's step, since GPU work of step N often runs after step N ends.
    """
    n = events.num_rows
    names = column_array(events, "name")
    name = names.indices.to_numpy()
    step_of_code = _step_numbers(names.dictionary) if len(names.dictionary) else np.full(1, -1)
    ts = events.column("ts_ns").to_numpy()
    dur = events.column("dur_ns").to_numpy()
    rows = np.flatnonzero((step_of_code[name] >= 0) & in_kinds(kind, CPU_KINDS))
    rows = rows[np.argsort(ts[rows], kind="stable")]
    table = pd.DataFrame(
        {
            "step": step_of_code[name[rows]],
            "uid": rows,
            "ts_ns": ts[rows],
            "dur_ns": dur[rows],
            "lane": lane[rows],
        }
    )
    out = np.full(n, -1, dtype=np.int32)
    if len(rows) == 0:
        return out, table
    starts, ends = ts[rows], ts[rows] + np.maximum(dur[rows], 0)
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (lane >= 0) & (idx >= 0) & (ts < ends[np.clip(idx, 0, None)])
    out[inside] = table["step"].to_numpy()[idx[inside]]
    dev = in_kinds(kind, GPU_KINDS) & (launcher >= 0)
    out[dev] = out[launcher[dev]]
    return out, table


def launchers(events: pa.Table, kind: npt.NDArray[np.int8]) -> I64:
    """For GPU work and sync records, the uid of the runtime/driver call with its correlation.

    This also pairs launches that have no flow event (ROCm ``hipGraphLaunch``): every
    kernel of a graph carries the launch's correlation id.
    """
    corr = events.column("correlation").to_numpy()
    out = np.full(events.num_rows, -1, dtype=np.int64)
    host = np.flatnonzero(((kind == Kind.RUNTIME) | (kind == Kind.DRIVER)) & (corr != NA))
    dev = np.flatnonzero(in_kinds(kind, GPU_WORK_KINDS | {Kind.SYNC}) & (corr != NA))
    if len(host) == 0 or len(dev) == 0:
        return out
    # runtime calls win over driver calls sharing a correlation (cuLaunchKernel under cudaLaunchKernel)
    pref = np.where(kind[host] == Kind.RUNTIME, 0, 1)
    host = host[np.lexsort((pref, corr[host]))]
    hc = corr[host]
    first = np.ones(len(host), dtype=bool)
    first[1:] = hc[1:] != hc[:-1]
    host, hc = host[first], hc[first]
    pos = np.clip(np.searchsorted(hc, corr[dev]), 0, len(hc) - 1)
    hit = hc[pos] == corr[dev]
    out[dev[hit]] = host[pos[hit]]
    return out
