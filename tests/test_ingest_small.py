"""The reader on the shipped small traces and on synthetic ones written here (no corpus needed)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctda.ingest.kinds import Kind
from ctda.ingest.reader import read_trace
from ctda.ingest.table import NA, EventTable

DATA = Path(__file__).parent / "data"
PID = 4242


def write(path: Path, events: list[dict[str, Any]] | None, doc: Any = None, **top: Any) -> Path:
    """A trace file; gzip when the name ends in .gz. ``doc`` replaces the whole document."""
    body = doc if doc is not None else {"schemaVersion": 1, "traceEvents": events, **top}
    text = json.dumps(body).encode()
    path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return path


def cpu(name: str, ts: Any, dur: Any, tid: Any = 1, cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def gpu(
    name: str, ts: Any, dur: Any, corr: int, stream: int = 7, cat: str = "kernel", **args: Any
) -> dict[str, Any]:
    args = {"device": 0, "stream": stream, "correlation": corr, **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def flow(cat: str, fid: int, ph: str, ts: Any, pid: Any = PID, tid: Any = 1) -> dict[str, Any]:
    ev = {"ph": ph, "id": fid, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": cat}
    if ph == "f":
        ev["bp"] = "e"
    return ev


def row(table: EventTable, name: str) -> int:
    rows = np.flatnonzero(table.decoded("name") == name)
    assert len(rows) == 1, name
    return int(rows[0])


# --- shipped traces ---------------------------------------------------------------


def test_2020_bare_list_with_old_category_names() -> None:
    table = read_trace(DATA / "kineto/resnet50_nw0_2020_bare_list.json.gz")
    assert table.meta.bare_list and table.meta.top_level_keys == []
    cats = set(table.strings("cat"))
    assert {"Operator", "Runtime", "Kernel", "Memcpy"} <= cats
    kinds = table.col("kind")
    assert (
        np.sum(kinds == Kind.CPU_OP) > 0
        and np.sum(kinds == Kind.RUNTIME) > 0
        and np.sum(kinds == Kind.KERNEL) > 0
    )
    # 2020 spellings: "external id" in device records, string tids like "stream 7"
    kernels = np.flatnonzero(kinds == Kind.KERNEL)
    assert np.all(table.col("external_id")[kernels] != NA)
    assert "stream 7" in set(table.strings("tid"))
    gpu_lanes = table.lanes[table.lanes.is_gpu.astype(bool)]
    assert gpu_lanes[["device", "stream"]].values.tolist() == [[0, 7]]
    # kernels pair with their Runtime launch by correlation, except 736 whose correlation
    # has no Runtime event in the trace (the same launches show as lone flow finishes)
    launcher = table.col("launcher")[kernels]
    assert np.sum(launcher < 0) == 736
    assert table.meta.warnings["flow finishes with no start (lone 'f')"] == 765
    assert set(table.decoded("cat", launcher[launcher >= 0])) == {"Runtime"}


def test_steps_are_assigned_to_cpu_events_and_to_launched_gpu_work() -> None:
    table = read_trace(DATA / "kineto/resnet50_nw0_2020_bare_list.json.gz")
    step, kind = table.col("step"), table.col("kind")
    assert sorted(set(step[step >= 0].tolist())) == [5, 6, 7, 8, 9, 10]
    ts = table.col("ts_ns")
    for s in (5, 10):
        span = row(table, f"ProfilerStep#{s}")
        inside = (step == s) & (kind == Kind.CPU_OP)
        assert np.all(ts[inside] >= ts[span])
        assert np.all(ts[inside] < ts[span] + table.col("dur_ns")[span])
    kernels = np.flatnonzero((kind == Kind.KERNEL) & (table.col("launcher") >= 0))
    assert np.array_equal(step[kernels], step[table.col("launcher")[kernels]])


def test_parquet_round_trip(tmp_path: Path) -> None:
    source = DATA / "hta/simple_add_overlaid_critical_path_HTA_OUTPUT.json.gz"
    table = read_trace(source)
    target = tmp_path / "trace.parquet"
    table.write_parquet(target)
    back = read_trace(target)
    assert back.events.schema.equals(table.events.schema)
    assert back.events.equals(table.events)
    for name in table.events.column_names:
        assert back.events.column(name).equals(table.events.column(name)), name
    assert back.lanes.equals(table.lanes)
    assert back.lanes.dtypes.to_dict() == table.lanes.dtypes.to_dict()
    assert back.flows.equals(table.flows)
    assert back.meta == table.meta


def test_cuda_sync_events_keep_their_args() -> None:
    table = read_trace(DATA / "hta/cuda_event_sync_tiny.json.gz")
    sync = np.flatnonzero(table.col("kind") == Kind.SYNC)
    kinds = set(table.decoded("sync_kind", sync))
    assert {"Event Sync", "Stream Sync", "Context Sync"} <= kinds
    assert np.all(table.col("correlation")[sync] != NA)
    assert np.all(table.col("launcher")[sync] >= 0)  # each sync record's cudaXSynchronize call
    launched = set(table.decoded("name", table.col("launcher")[sync]))
    assert {"cudaEventSynchronize", "cudaStreamSynchronize", "cudaDeviceSynchronize"} <= launched


def test_distributed_info_and_device_properties() -> None:
    table = read_trace(DATA / "hta/cpu_only_gloo_rank34_full.json.gz")
    assert table.meta.rank == 34 and table.meta.world_size == 300
    assert table.meta.distributed_info["backend"] == "gloo"
    assert "deviceProperties" in table.meta.top_level_keys
    # fwdbwd flows join forward ops to backward ops on CPU threads
    assert len(table.flows) == 55
    assert np.all(table.flows.src_uid >= 0) and np.all(table.flows.dst_uid >= 0)


# --- synthetic traces ---------------------------------------------------------------


def test_int_microseconds_become_exact_nanoseconds(tmp_path: Path) -> None:
    events = [cpu("a", 1695835542514261, 3), cpu("b", 1695835542514262.5, 0.25), cpu("c", 17.001, 2)]
    table = read_trace(write(tmp_path / "t.json", events))
    assert table.col("ts_ns").tolist() == [1695835542514261000, 1695835542514262500, 17001]
    assert table.col("dur_ns").tolist() == [3000, 250, 2000]
    assert table.col("ts_ns").dtype == np.int64


def test_epoch_float_microseconds_keep_their_nanoseconds(tmp_path: Path) -> None:
    # float64 holds 1712195495519689.047 only to 0.25 µs: the reader reparses the text
    # (written by hand: Python's json would print the float64 value, 1712195495519689.0)
    text = ",".join(
        f'{{"ph": "X", "cat": "cpu_op", "name": "{n}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {d}}}'
        for n, ts, d in (("a", "1712195495519689.047", "63.813"), ("b", "1712195495519695.812", "53.09"))
    )
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + text + "]}")
    table = read_trace(path)
    assert table.col("ts_ns").tolist() == [1712195495519689047, 1712195495519695812]
    assert table.col("dur_ns").tolist() == [63813, 53090]


def test_string_and_int_pids_and_tids(tmp_path: Path) -> None:
    events = [
        cpu("int", 10, 5, tid=7),
        {**cpu("str", 20, 5), "pid": str(PID), "tid": "7"},  # same thread, written as strings
        gpu("k", 30, 5, corr=1, stream=7),
        {**gpu("old", 40, 5, corr=2), "tid": "stream 7", "args": {}},  # 2020 style: no args
        {"ph": "i", "name": "marker", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 15, "s": "t"},
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    lanes = table.col("lane")
    assert lanes[row(table, "int")] == lanes[row(table, "str")]
    # the GPU stream from args and the one parsed from "stream 7" are the same lane
    assert lanes[row(table, "k")] == lanes[row(table, "old")] >= 0
    assert table.col("kind")[row(table, "marker")] == Kind.INSTANT
    assert lanes[row(table, "marker")] == -1


def test_gpu_pid_equal_to_a_cpu_pid_stays_a_separate_lane(tmp_path: Path) -> None:
    # a CPU process whose pid is 0, like GPU device 0, with a thread id equal to the stream
    events = [{**cpu("host op", 10, 50, tid=7), "pid": 0}, gpu("kernel", 20, 5, corr=1, stream=7)]
    table = read_trace(write(tmp_path / "t.json", events))
    host, kernel = row(table, "host op"), row(table, "kernel")
    assert table.col("lane")[host] != table.col("lane")[kernel]
    assert table.lanes.is_gpu.astype(bool).tolist() == [False, True]
    assert table.col("parent")[kernel] == -1  # GPU work is never nested under a CPU slice


def test_external_id_and_event_index_spellings(tmp_path: Path) -> None:
    events = [
        cpu("new", 10, 5, **{"External id": 11, "Ev Idx": 1}),
        cpu("old", 20, 5, **{"external id": 12, "Profiler Event Index": 2}),
        {**cpu("runtime", 30, 5, cat="Runtime"), "args": {"external id": 13, "correlation": 5}},
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    assert table.col("external_id").tolist() == [11, 12, 13]
    assert table.col("ev_idx").tolist() == [1, 2, NA]


def test_one_flow_start_to_many_finishes(tmp_path: Path) -> None:
    """cudaGraphLaunch: one ac2g start, a finish on every kernel of the graph."""
    events = [
        cpu("cudaGraphLaunch", 100, 20, cat="cuda_runtime", correlation=9),
        flow("ac2g", 9, "s", 100),
        *[gpu(f"graph kernel {i}", 200 + 10 * i, 5, corr=9) for i in range(3)],
        *[flow("ac2g", 9, "f", 200 + 10 * i, pid=0, tid=7) for i in range(3)],
        flow("ac2g", 77, "f", 300, pid=0, tid=7),  # lone finish: no start, no event at 300
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    launch = row(table, "cudaGraphLaunch")
    kernels = [row(table, f"graph kernel {i}") for i in range(3)]
    flows = table.flows
    graph = flows[flows.flow_id == 9]
    assert graph.src_uid.tolist() == [launch] * 3
    assert sorted(graph.dst_uid.tolist()) == kernels
    lone = flows[flows.flow_id == 77]
    assert lone.src_uid.tolist() == [-1] and lone.dst_uid.tolist() == [-1]
    assert table.meta.warnings["flow finishes with no start (lone 'f')"] == 1
    assert table.meta.warnings["flow points not bound to any event"] == 1
    assert table.col("flow_enclosing")[np.flatnonzero(table.decoded("ph") == "f")].all()


def test_rocm_graph_launch_without_flows_is_paired_by_correlation(tmp_path: Path) -> None:
    events = [
        cpu("hipGraphLaunch", 100, 20, cat="cuda_runtime", correlation=31),
        cpu("hipLaunchKernel", 130, 5, cat="cuda_runtime", correlation=32),
        *[gpu(f"graph kernel {i}", 200 + 10 * i, 5, corr=31) for i in range(4)],
        gpu("single", 260, 5, corr=32),
        gpu("orphan", 270, 5, corr=99),
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    launcher = table.col("launcher")
    assert {int(launcher[row(table, f"graph kernel {i}")]) for i in range(4)} == {
        row(table, "hipGraphLaunch")
    }
    assert launcher[row(table, "single")] == row(table, "hipLaunchKernel")
    assert launcher[row(table, "orphan")] == -1
    assert len(table.flows) == 0


def test_python_functions_nest_under_their_callers(tmp_path: Path) -> None:
    py = "python_function"
    events = [
        cpu("train.py(10): main", 0, 100, cat=py, **{"Python id": 1, "Python parent id": 0}),
        cpu("model.py(5): forward", 10, 50, cat=py, **{"Python id": 2, "Python parent id": 1}),
        cpu("aten::mm", 20, 10),
        cpu("model.py(9): loss", 70, 20, cat=py, **{"Python id": 3, "Python parent id": 1}),
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    main, fwd, mm, loss = (
        row(table, n) for n in ("train.py(10): main", "model.py(5): forward", "aten::mm", "model.py(9): loss")
    )
    parent, depth = table.col("parent"), table.col("depth")
    assert parent[[main, fwd, mm, loss]].tolist() == [-1, main, fwd, main]
    assert depth[[main, fwd, mm, loss]].tolist() == [0, 1, 2, 1]
    assert table.col("python_id")[[main, fwd, mm, loss]].tolist() == [1, 2, NA, 3]
    assert table.col("python_parent_id")[[fwd, loss]].tolist() == [1, 1]


def test_instant_counter_and_metadata_events_are_kept(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": 1, "args": {"name": "main thread"}},
        {"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "args": {"labels": "rank 0"}},
        cpu("op", 10, 5),
        {"ph": "i", "name": "Iteration Start", "pid": PID, "tid": 1, "ts": 12, "s": "t"},
        {"ph": "C", "name": "GPU Memory", "pid": PID, "ts": 14, "args": {"bytes": 1024}},
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    assert table.col("kind").tolist() == [
        Kind.METADATA,
        Kind.METADATA,
        Kind.CPU_OP,
        Kind.INSTANT,
        Kind.COUNTER,
    ]
    assert table.decoded("meta_name").tolist()[:2] == ["main thread", "rank 0"]
    assert table.lanes.thread_name.tolist() == ["main thread"]
    assert table.col("lane").tolist() == [-1, -1, 0, -1, -1]


def test_cuda_sync_args(tmp_path: Path) -> None:
    events = [
        cpu("cudaStreamWaitEvent", 10, 5, cat="cuda_runtime", correlation=4),
        gpu(
            "Stream Wait Event",
            12,
            0,
            corr=4,
            cat="cuda_sync",
            cuda_sync_kind="Stream Wait Event",
            wait_on_stream=20,
            wait_on_cuda_event_record_corr_id=3,
        ),
        {**gpu("Context Sync", 20, 1, corr=5, cat="cuda_sync", cuda_sync_kind="Context Sync"), "tid": -1},
    ]
    events[2]["args"]["stream"] = 4294967295
    table = read_trace(write(tmp_path / "t.json", events))
    wait = row(table, "Stream Wait Event")
    assert table.decoded("sync_kind", np.array([wait]))[0] == "Stream Wait Event"
    assert table.col("wait_on_stream")[wait] == 20 and table.col("wait_on_event_corr")[wait] == 3
    assert table.col("launcher")[wait] == row(table, "cudaStreamWaitEvent")
    # the device-wide record gets the device's stream -1 lane, however the stream was written
    lanes = table.lanes.set_index("lane")
    assert lanes.loc[table.col("lane")[row(table, "Context Sync")], "stream"] == -1


def test_gzip_and_plain_json_read_the_same(tmp_path: Path) -> None:
    events = [cpu("a", 1, 2), cpu("b", 2, 1), flow("fwdbwd", 1, "s", 1), flow("fwdbwd", 1, "f", 2)]
    plain = read_trace(write(tmp_path / "t.json", events))
    packed = read_trace(write(tmp_path / "t.json.gz", events))
    assert plain.events.equals(packed.events)
    assert packed.flows.src_uid.tolist() == [0] and packed.flows.dst_uid.tolist() == [1]


@pytest.mark.parametrize(
    "tail", [{}, {"traceName": "x.json", "deviceProperties": [{"id": 0, "name": "GPU"}]}]
)
def test_metadata_before_and_after_the_event_array(tmp_path: Path, tail: dict[str, Any]) -> None:
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 3, "world_size": 8},
        "traceEvents": [cpu("a", 1, 2)],
        **tail,
    }
    table = read_trace(write(tmp_path / "t.json", None, doc=doc))
    assert table.meta.rank == 3 and table.meta.world_size == 8
    assert table.meta.schema_version == 1
    assert sorted(table.meta.top_level_keys) == sorted(doc)
    assert [d["name"] for d in table.meta.device_properties] == (["GPU"] if tail else [])
