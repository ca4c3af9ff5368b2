"""Turn an :class:`~ctda.analysis.engine.Analysis` into the store's rows (Arrow tables).

Everything here is vectorised numpy/pyarrow, so building the rows of a 1M-event run costs
about as much as one pass over its columns. The tables do not depend on the store: the
run id (and so ``Event.key``) is attached at write time with :meth:`RunData.keyed`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from ctda import __version__
from ctda.analysis import breakdowns, report, tables
from ctda.analysis.classify import CLASSES
from ctda.analysis.edges import EdgeType
from ctda.analysis.engine import Analysis
from ctda.ingest.columns import NA
from ctda.ingest.kinds import Kind
from ctda.ingest.npx import run_positions
from ctda.ingest.table import EventTable
from ctda.store import schema
from ctda.store.schema import BASELINE, KEY_SPAN

I64 = npt.NDArray[np.int64]
BOUNDS_LANE = "(window bounds)"


@dataclass
class RunData:
    """Rows of one run, ready for either store (indices are analysed-event indices)."""

    name: str
    run: dict[str, Any]  # Run properties except id/status/heartbeat
    events: pa.Table  # schema.EVENT columns except key/run_id
    deps: pa.Table  # src, dst (event idx) + schema.DEP columns
    windows: pa.Table  # schema.WINDOW columns except key/run_id/scenario
    cp: pa.Table  # window (idx), target (event idx) + schema.CP columns
    scenario: dict[str, Any]  # schema.SCENARIO properties except key/run_id
    rules: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)  # e.g. "snapshot": the analysis
    #: label name (schema.BREAKDOWN_LABELS) -> its rows, columns except key/run_id
    breakdowns: dict[str, pa.Table] = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        """Events plus dependency edges: the figure rows/s is measured on."""
        return self.events.num_rows + self.deps.num_rows

    def scenario_table(self, run_id: int) -> pa.Table:
        """The baseline Scenario as a one-row table (its path list loads fast from Arrow)."""
        props = dict(self.scenario, run_id=run_id, key=schema.scenario_key(run_id, self.scenario["name"]))
        types = dict(schema.SCENARIO.props)
        return pa.table({c: pa.array([props[c]], _arrow_type(types[c])) for c in schema.SCENARIO.columns})

    def keyed(self, run_id: int) -> dict[str, pa.Table]:
        """Tables with global keys for ``run_id``, columns in schema order.

        ``dep`` and ``cp`` start with their endpoint keys (Ladybug's COPY wants FROM, TO).
        """
        base = run_id * KEY_SPAN
        ev = self.events
        events = ev.add_column(0, "run_id", pa.array(np.full(ev.num_rows, run_id, np.int64)))
        events = events.add_column(0, "key", pa.array(int_column(ev, "idx") + base))
        deps = self.deps
        dep = pa.table(
            {"from": int_column(deps, "src") + base, "to": int_column(deps, "dst") + base}
            | {c: deps.column(c) for c in schema.DEP.columns}
        )
        scen = self.scenario["name"]
        w_idx = int_column(self.windows, "idx")
        wkeys = [schema.window_key(run_id, scen, int(i)) for i in w_idx]
        windows = pa.table(
            {"key": wkeys, "run_id": np.full(len(w_idx), run_id, np.int64), "scenario": [scen] * len(w_idx)}
            | {c: self.windows.column(c) for c in schema.WINDOW.columns[3:]}
        )
        segs = path_segments(
            run_id, scen, int_column(self.cp, "window"), wkeys, w_idx, int_column(self.cp, "pos")
        )
        cp = pa.table(
            {"from": segs.cp_from(), "to": int_column(self.cp, "target") + base}
            | {c: self.cp.column(c) for c in schema.CP.columns}
        )
        side = {label: keyed_rows(run_id, t) for label, t in self.breakdowns.items()}
        return side | {
            "Event": events.select(schema.EVENT.columns),
            "DEP": dep,
            "Window": windows,
            "Segment": segs.rows,
            "HAS_SEGMENT": segs.links,
            "CP": cp,
        }


class Segments(NamedTuple):
    """Critical paths cut into Segment nodes (see :data:`schema.SEGMENT_SIZE`)."""

    rows: pa.Table  # schema.SEGMENT columns
    links: pa.Table  # HAS_SEGMENT: from (window key), to (segment key)
    window: I64  # per segment: its window's index into the window keys
    of_cp: I64  # per CP row: its segment's row

    def cp_from(self) -> pa.Array:
        """Each CP row's segment key (the relationship's FROM end)."""
        return _coded(self.of_cp, self.rows.column("key").to_pylist())


def path_segments(
    run_id: int,
    scenario: str,
    window: npt.ArrayLike,
    wkeys: list[str],
    widx: npt.ArrayLike,
    pos: npt.ArrayLike,
) -> Segments:
    """The segments of the paths whose CP rows are given by ``window`` (an index into
    ``wkeys`` and ``widx``, the windows' keys and idx) and ``pos`` (the place on that
    window's path); rows in any order."""
    window_idx = np.asarray(widx, dtype=np.int64)
    w = np.asarray(window, dtype=np.int64)
    seg = np.asarray(pos, dtype=np.int64) // schema.SEGMENT_SIZE
    pairs, code = np.unique(np.stack([w, seg], axis=1), axis=0, return_inverse=True)
    pairs = pairs.reshape(-1, 2).astype(np.int64)
    keys = [schema.segment_key(wkeys[int(a)], int(b)) for a, b in pairs]
    rows = pa.table(
        {
            "key": pa.array(keys, pa.string()),
            "run_id": pa.array(np.full(len(keys), run_id, np.int64)),
            "scenario": pa.array([scenario] * len(keys), pa.string()),
            "window": pa.array(window_idx[pairs[:, 0]] if len(keys) else np.zeros(0, np.int64)),
            "idx": pa.array(pairs[:, 1]),
            "pos": pa.array(pairs[:, 1] * schema.SEGMENT_SIZE),
        }
    )
    links = pa.table({"from": _coded(pairs[:, 0], wkeys), "to": rows.column("key")})
    return Segments(rows, links, pairs[:, 0], np.asarray(code, dtype=np.int64).reshape(-1))


def int_column(t: pa.Table, name: str) -> I64:
    """An integer column as an int64 numpy array."""
    return np.asarray(t.column(name).to_numpy(), dtype=np.int64)


def _nullable(values: npt.NDArray[np.int64]) -> pa.Array:
    """Trace ints use an NA sentinel; the store keeps them as nulls."""
    return _unless(values, NA)


def _unless(values: npt.NDArray[np.int64], missing: int) -> pa.Array:
    """Ints with ``missing`` as null: absent values cost Neo4j no storage."""
    return pa.array(values, type=pa.int64(), mask=values == missing)


def _coded(codes: npt.ArrayLike, values: npt.ArrayLike) -> pa.Array:
    """Plain strings ``values[codes]``, gathered in Arrow (no Python object per row)."""
    vals = pa.array(np.asarray(values, dtype=object), type=pa.string())
    idx = pa.array(np.asarray(codes, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(idx, vals).cast(pa.string())


def _padded(t: EventTable, col: str, uid: I64, source: str, sink: str, fold: Any = None) -> pa.Array:
    """A dictionary column of the trace for analysed events, then SOURCE and SINK labels."""
    values = list(t.strings(col))
    if fold is not None:
        values = [fold(v) for v in values]
    codes = t.col(col)[uid].astype(np.int64)
    k = len(values)
    codes = np.concatenate([np.where(codes >= 0, codes, k), [k + 1, k + 2]])
    return _coded(codes, [*values, "", source, sink])


def file_digest(path: str, chunk: int = 1 << 22) -> str:
    """sha256 of a file's bytes (the run's provenance and its idempotency key)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def node_event(nodes_n: int, node: I64) -> I64:
    """Event index of graph nodes: 2i, 2i+1 -> i; SOURCE -> n; SINK -> n + 1."""
    return np.where(node < 2 * nodes_n, node // 2, node - nodes_n)


def build(a: Analysis, name: str, file: str, sha256: str) -> RunData:
    """All rows of one analysed trace: events, edges, windows, critical paths, scenario."""
    n = a.nodes.n
    g, cal, tm = a.graph, a.calibration, a.timing
    ch = a.charges
    events, ev_win = _events(a)
    charged_edges = ch.edge.to_numpy(dtype=np.int64)
    dep_on_cp = np.zeros(g.n_edges, dtype=bool)
    dep_on_cp[charged_edges] = True
    etype_names = [t.name.lower() for t in EdgeType]
    rule_names = list(g.rule_names)
    deps = pa.table(
        {
            "src": node_event(n, g.src),
            "dst": node_event(n, g.dst),
            "edge": np.arange(g.n_edges, dtype=np.int64),
            "type": _coded(g.etype, etype_names),
            "rule": _coded(g.rule, rule_names),
            "weight": cal.weight.astype(np.int64),
            "gap": cal.gap.astype(np.int64),
            "binding": cal.binding.astype(bool),
            "on_cp": dep_on_cp,
            "src_end": (g.src % 2 == 1) & (g.src < 2 * n),
            "dst_end": (g.dst % 2 == 1) & (g.dst < 2 * n),
            "owner": _unless(g.owner.astype(np.int64), -1),
        }
    )
    windows = _windows(a, ev_win, events)
    cp = _cp(a, rule_names)
    starts, ends = a.window_bounds()
    step_ns = [int(x) for x in ends - starts]
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    meta = a.table.meta
    run = {
        "name": name,
        "file": file,
        "sha256": sha256,
        "ctda_version": __version__,
        "options_json": json.dumps(tables.options_dict(a.options), sort_keys=True),
        "options_key": tables.options_key(a.options),
        "ingested_at": now,
        "schema_version": schema.SCHEMA_VERSION,
        "steps": len(a.windows),
        "step_ns": step_ns,
        "cp_ns": int(ch.ns.sum()),
        "events": n,
        "edges": int(g.n_edges),
        "t0_ns": int(a.nodes.time[a.nodes.source]),
        "has_gpu": bool(a.nodes.is_gpu.any()),
        "checks_json": json.dumps(report.checks(a)),
        "graph_json": json.dumps(tables.graph_summary(a)),
        "trace_json": json.dumps(
            {
                "rank": meta.rank,
                "world_size": meta.world_size,
                "n_bytes": meta.n_bytes,
                "warnings": meta.warnings,
            }
        ),
    }
    scenario = {
        "name": BASELINE,
        "overrides_json": "{}",
        "step_ns": step_ns,
        "cp_ns": int(ch.ns.sum()),
        "path": tm.path.astype(np.int64).tolist(),
        "created_at": now,
        "data_json": "",
        "path_packed": None,  # the baseline's path is the list above (loaded from Arrow)
    }
    return RunData(
        name, run, events, deps, windows, cp, scenario, tables.rule_docs(), breakdowns=breakdown_rows(a)
    )


def keyed_rows(run_id: int, rows: pa.Table) -> pa.Table:
    """A per-run table with its ``key`` (``<run id>/<row>``) and ``run_id`` columns first."""
    with_run = rows.add_column(0, "run_id", pa.array(np.full(rows.num_rows, run_id, np.int64)))
    return with_run.add_column(
        0, "key", pa.array([f"{run_id}/{i}" for i in range(rows.num_rows)], pa.string())
    )


def breakdown_rows(a: Analysis) -> dict[str, pa.Table]:
    """The stored breakdowns (label name -> rows in schema order, without key/run_id)."""
    every = breakdowns.Breakdowns(a)
    out = {}
    for kind, label in schema.BREAKDOWN_LABELS.items():
        frame = every.table(kind)
        types = dict(label.props)
        cols = label.columns[2:]
        out[label.name] = pa.table(
            {c: pa.array(frame[c].to_numpy() if len(frame) else [], _arrow_type(types[c])) for c in cols}
        )
    return out


def _factorized(values: npt.NDArray[np.object_]) -> pa.Array:
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return _coded(codes, np.asarray(uniques, dtype=object))


def _events(a: Analysis) -> tuple[pa.Table, I64]:
    """Event rows (analysed events, then SOURCE and SINK) and each event's window."""
    t, nd, tm = a.table, a.nodes, a.timing
    n = nd.n
    uid = nd.uid
    ch = a.charges
    g = a.graph
    charged = ch.event.to_numpy(dtype=np.int64)
    ns = ch.ns.to_numpy(dtype=np.int64)
    cp_ns = np.bincount(charged[charged >= 0], weights=ns[charged >= 0], minlength=n).astype(np.int64)[:n]
    on_cp = np.zeros(n + 2, dtype=bool)
    edges = ch.edge.to_numpy(dtype=np.int64)
    on_cp[node_event(n, g.src[edges])] = True
    on_cp[node_event(n, g.dst[edges])] = True
    on_cp[:n] |= cp_ns > 0
    window = tables.Windows(a).of_event
    lanes = _lane_lut(a)
    kind_names = [k.name.lower() for k in Kind]
    slack = tm.slack

    def pad(values: npt.ArrayLike, source: Any, sink: Any) -> npt.NDArray[Any]:
        arr = np.asarray(values)
        return np.concatenate([arr, np.array([source, sink], dtype=arr.dtype)])

    def trace_int(col: str) -> pa.Array:
        return _nullable(pad(t.col(col)[uid].astype(np.int64), NA, NA))

    t_src, t_sink = int(nd.time[nd.source]), int(nd.time[nd.sink])
    names = np.concatenate([tables.display_names(a), np.array(["(source)", "(sink)"], dtype=object)])
    table = pa.table(
        {
            "idx": np.arange(n + 2, dtype=np.int64),
            "uid": pad(uid, -1, -1),
            "name": _padded(t, "name", uid, "(source)", "(sink)"),
            "display_name": _factorized(names),
            "cat": _padded(t, "cat", uid, "", ""),
            "kind": _coded(
                pad(nd.kind.astype(np.int64), len(Kind), len(Kind) + 1), [*kind_names, "source", "sink"]
            ),
            "pid": _padded(t, "pid", uid, "", ""),
            "tid": _padded(t, "tid", uid, "", ""),
            "ts_ns": pad(nd.ts, t_src, t_sink),
            "dur_ns": pad(nd.end - nd.ts, 0, 0),
            "lane_label": _coded(_lane_codes(nd.lane, n, lanes), lanes),
            "step": _unless(pad(t.col("step")[uid].astype(np.int64), -1, -1), -1),
            "window": _unless(pad(window, -1, -1), -1),
            "parent": _unless(pad(nd.parent, -1, -1), -1),
            "correlation": trace_int("correlation"),
            "external_id": trace_int("external_id"),
            "on_cp": on_cp,
            "cp_ns": pad(cp_ns, 0, 0),
            "self_ns": pad(report.self_time(a), 0, 0),
            "slack_ns": pad(slack[0 : 2 * n : 2], slack[nd.source], slack[nd.sink]),
            "class": _coded(pad(a.event_cls.astype(np.int64), len(CLASSES), len(CLASSES)), [*CLASSES, ""]),
        }
    )
    return table, window


def _lane_lut(a: Analysis) -> list[str]:
    """Label of lane k at position k, then the SOURCE/SINK label at the end."""
    labels = tables.lane_labels(a)
    top = max([*labels, int(a.nodes.lane.max(initial=-1))], default=-1)
    return [labels.get(k, "") for k in range(top + 1)] + [BOUNDS_LANE]


def _lane_codes(lane: npt.NDArray[Any], n: int, lut: list[str]) -> I64:
    """Codes into :func:`_lane_lut` for events 0..n+1 (SOURCE/SINK get the bounds label)."""
    return np.concatenate([lane.astype(np.int64), [len(lut) - 1, len(lut) - 1]])


def _windows(a: Analysis, ev_win: I64, events: pa.Table) -> pa.Table:
    """One row per window: :func:`ctda.analysis.tables.window_table`, the self time of the
    events in it and the event that defines it (the ``ProfilerStep`` span; -1: none)."""
    w = tables.window_table(a).rename(columns={"window": "label"})
    self_ns = int_column(events, "self_ns")[: a.nodes.n]
    inside = ev_win >= 0
    w["self_ns"] = tables.sum_by(ev_win[inside], self_ns[inside], len(a.windows))
    w["event"] = np.array([int(x.event) for x in a.windows], dtype=np.int64)
    types = dict(schema.WINDOW.props)
    return pa.table({c: pa.array(w[c].tolist(), _arrow_type(types[c])) for c in schema.WINDOW.columns[3:]})


def _cp(a: Analysis, rule_names: list[str]) -> pa.Table:
    """Each window's critical path, in order, with what every step is charged to."""
    n = a.nodes.n
    g = a.graph
    ch = a.charges
    edge = ch.edge.to_numpy(dtype=np.int64)
    event = ch.event.to_numpy(dtype=np.int64)
    win = ch.window.to_numpy(dtype=np.int64)
    cls = ch.cls.to_numpy(dtype=np.int64)
    dst_ev = node_event(n, g.dst[edge])
    target = np.where(event >= 0, event, dst_ev)
    # rows are in path order within each window, windows in order
    pos = run_positions(win)
    return pa.table(
        {
            "window": win,
            "target": target,
            "pos": pos,
            "edge": edge,
            "t0": np.maximum(ch.t0.to_numpy(dtype=np.int64), a.window_bounds()[0][win]),
            "ns": ch.ns.to_numpy(dtype=np.int64),
            "rule": _coded(ch.rule.to_numpy(dtype=np.int64), rule_names),
            "class": _coded(cls, CLASSES),
            "wait": event < 0,
        }
    )


def _arrow_type(t: str) -> pa.DataType:
    return {
        "INT64": pa.int64(),
        "STRING": pa.string(),
        "BOOL": pa.bool_(),
        "BLOB": pa.binary(),
        "DOUBLE": pa.float64(),
        "INT64[]": pa.list_(pa.int64()),
    }[t]
