"""The step replicator (bench/replicate.py): synthetic traces must stay valid Kineto traces.

Each check reads the replicated trace back with the real reader, so "valid" means "the
reader and its derived columns (launchers, steps, flows) see consistent copies".
"""

from __future__ import annotations

import gzip
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from bench.replicate import ReplicateResult, main, parse_amount, replicate
from ctda.ingest.columns import NA
from ctda.ingest.kinds import GPU_WORK_KINDS, Kind, in_kinds
from ctda.ingest.reader import read_trace
from ctda.ingest.table import EventTable

DATA = Path(__file__).parent / "data"
SRC = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"
COPIES = 3

Replicated = tuple[ReplicateResult, EventTable, EventTable]


@pytest.fixture(scope="module")
def rep(tmp_path_factory: pytest.TempPathFactory) -> Replicated:
    out = tmp_path_factory.mktemp("replicate") / "minitoy_x3.json.gz"
    res = replicate(SRC, out, copies=COPIES)
    return res, read_trace(SRC), read_trace(out)


def _copy_rows(res: ReplicateResult, k: int) -> npt.NDArray[np.int64]:
    """Output uids of copy ``k`` (1-based); copies follow the source events in file order."""
    start = res.n_source_events + (k - 1) * res.n_window_events
    return np.arange(start, start + res.n_window_events)


def _bound_pairs(t: EventTable) -> set[tuple[int, int]]:
    f = t.flows
    both = f[(f.src_uid >= 0) & (f.dst_uid >= 0)]
    return set(zip(both.src_uid.tolist(), both.dst_uid.tolist(), strict=True))


def test_window_is_the_profiler_steps(rep: Replicated) -> None:
    res, src, _ = rep
    assert res.step_based
    assert 0 < res.n_window_events < len(src)
    assert res.copies == COPIES


def test_event_counts_scale(rep: Replicated) -> None:
    res, src, out = rep
    assert len(out) == len(src) + COPIES * res.n_window_events == res.n_events
    src_kinds = Counter(src.col("kind").tolist())
    win_kinds = Counter(src.col("kind")[res.members].tolist())
    out_kinds = Counter(out.col("kind").tolist())
    for kind in src_kinds:
        assert out_kinds[kind] == src_kinds[kind] + COPIES * win_kinds[kind], Kind(kind).name


def test_output_is_a_gzip_kineto_document(rep: Replicated) -> None:
    res, src, out = rep
    with res.out.open("rb") as fh:
        assert fh.read(2) == b"\x1f\x8b"
    assert out.meta.top_level_keys == src.meta.top_level_keys
    assert out.meta.n_bytes == res.n_bytes
    assert out.meta.device_properties == src.meta.device_properties


def test_runtime_correlations_unique(rep: Replicated) -> None:
    res, src, out = rep
    for t in (src, out):
        corr = t.col("correlation")[(t.col("kind") == Kind.RUNTIME) & (t.col("correlation") != NA)]
        assert len(corr) == len(np.unique(corr))
    # every GPU op that found its launch in the source finds it in every copy, in that copy
    work = np.flatnonzero(in_kinds(out.col("kind"), GPU_WORK_KINDS))
    src_launched = int(
        np.sum(src.col("launcher")[np.flatnonzero(in_kinds(src.col("kind"), GPU_WORK_KINDS))] >= 0)
    )
    win = res.members[in_kinds(src.col("kind")[res.members], GPU_WORK_KINDS)]
    win_launched = int(np.sum(src.col("launcher")[win] >= 0))
    assert int(np.sum(out.col("launcher")[work] >= 0)) == src_launched + COPIES * win_launched
    for k in range(1, COPIES + 1):
        rows = _copy_rows(res, k)
        launcher = out.col("launcher")[rows]
        assert np.all(np.isin(launcher[launcher >= 0], rows))


def test_fresh_ids_in_every_copy(rep: Replicated) -> None:
    res, src, out = rep
    for col in ("ev_idx", "python_id"):
        values = out.col(col)[out.col(col) != NA]
        src_values = src.col(col)[src.col(col) != NA]
        assert len(np.unique(values)) - len(np.unique(src_values)) == len(values) - len(src_values)
    # each copy's External ids lie above the source's and the previous copy's
    ext = out.col("external_id")
    prev_max = src.col("external_id").max()
    for k in range(1, COPIES + 1):
        values = ext[_copy_rows(res, k)]
        values = values[values != NA]
        assert values.min() > prev_max
        prev_max = values.max()


def test_flows_still_pair(rep: Replicated) -> None:
    res, src, out = rep
    src_pairs = _bound_pairs(src)
    members = set(res.members.tolist())
    win_pairs = [(a, b) for a, b in src_pairs if a in members and b in members]
    assert win_pairs
    out_pairs = _bound_pairs(out)
    assert len(out_pairs) == len(src_pairs) + COPIES * len(win_pairs)
    position = {int(uid): i for i, uid in enumerate(res.members)}
    for k in range(1, COPIES + 1):
        base = res.n_source_events + (k - 1) * res.n_window_events
        expected = {(base + position[a], base + position[b]) for a, b in win_pairs}
        assert expected <= out_pairs


def test_step_numbers_continue(rep: Replicated) -> None:
    _, src, out = rep
    for t, n in ((src, 2), (out, 2 * (1 + COPIES))):
        steps = t.decoded("name")
        cpu = np.flatnonzero(
            (t.col("kind") == Kind.USER_ANNOTATION)
            & np.array([str(s).startswith("ProfilerStep#") for s in steps])
        )
        cpu = cpu[np.argsort(t.col("ts_ns")[cpu])]
        numbers = [int(str(steps[i]).split("#")[1]) for i in cpu]
        assert numbers == list(range(1, n + 1))
    # the reader's step column sees every copy as its own steps
    assert set(out.col("step").tolist()) - {-1} == set(range(1, 2 * (1 + COPIES) + 1))


def test_timestamps_shift_by_exactly_the_span(rep: Replicated) -> None:
    res, src, out = rep
    shift_ns = res.shift_us * 1000
    for k in range(1, COPIES + 1):
        rows = _copy_rows(res, k)
        assert np.array_equal(out.col("ts_ns")[rows], src.col("ts_ns")[res.members] + k * shift_ns)
        assert np.array_equal(out.col("dur_ns")[rows], src.col("dur_ns")[res.members])
        assert np.array_equal(out.decoded("cat", rows), src.decoded("cat", res.members))


def test_time_ordering_is_valid(rep: Replicated) -> None:
    res, src, out = rep
    ts, dur = out.col("ts_ns"), out.col("dur_ns")
    end = ts + np.where(dur == NA, 0, dur)
    spans = [(ts[r].min(), end[r].max()) for r in (_copy_rows(res, k) for k in range(1, COPIES + 1))]
    for (_, prev_end), (next_start, _) in pairwise(spans):
        assert prev_end <= next_start  # copies follow each other, never interleave
    src_end = src.col("ts_ns")[res.members] + np.maximum(src.col("dur_ns")[res.members], 0)
    assert src_end.max() <= spans[0][0]
    # nothing new for the reader to complain about: warnings scale with the window at most
    for what, count in out.meta.warnings.items():
        assert count <= (1 + COPIES) * src.meta.warnings.get(what, 0), what
    # GPU streams stay serial: kernels on one stream do not overlap
    kern = np.flatnonzero(out.col("kind") == Kind.KERNEL)
    for lane in np.unique(out.col("lane")[kern]):
        rows = kern[out.col("lane")[kern] == lane]
        rows = rows[np.argsort(ts[rows])]
        assert np.all(end[rows][:-1] <= ts[rows][1:])


def test_wait_references_follow_their_record(tmp_path: Path) -> None:
    """A stream wait points at the event record of its own copy (or, unchanged, at one
    recorded before the window)."""
    src_path = DATA / "hta" / "cuda_event_sync_tiny.json.gz"
    res = replicate(src_path, tmp_path / "sync.json", copies=2)
    src, out = read_trace(src_path), read_trace(res.out)
    src_corr = set(src.col("correlation").tolist())
    within = 0
    for k in (1, 2):
        rows = _copy_rows(res, k)
        col = out.col("wait_on_event_corr")[rows]
        waits = set(col[col != NA].tolist())
        own = set(out.col("correlation")[rows].tolist())
        assert waits <= own | src_corr
        within += len(waits & own)
    assert within > 0


def test_whole_trace_without_steps(tmp_path: Path) -> None:
    src_path = DATA / "hta" / "simple_add_param_benchmark.json.gz"
    res = replicate(src_path, tmp_path / "simple.json", copies=2)
    assert not res.step_based
    src, out = read_trace(src_path), read_trace(res.out)
    assert len(out) == len(src) + 2 * res.n_window_events
    assert len(_bound_pairs(out)) == 3 * len(_bound_pairs(src))
    assert "events outside the profiler's trace span" not in out.meta.warnings


def test_bare_list_trace(tmp_path: Path) -> None:
    src_path = DATA / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"
    res = replicate(src_path, tmp_path / "bare.json.gz", copies=1)
    out = read_trace(res.out)
    assert out.meta.bare_list
    assert len(out) == res.n_events


def test_targets_are_minimums(tmp_path: Path) -> None:
    res = replicate(SRC, tmp_path / "ev.json", events=1000)
    assert res.n_events >= 1000 > res.n_events - res.n_window_events
    res = replicate(SRC, tmp_path / "by.json", nbytes=500_000)
    assert res.n_bytes == (tmp_path / "by.json").stat().st_size >= 500_000
    res = replicate(SRC, tmp_path / "none.json", events=10)
    assert res.copies == 0 and res.n_events == res.n_source_events
    assert len(read_trace(res.out)) == res.n_source_events


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.json.gz"
    assert main([str(SRC), str(out), "--copies", "2", "--quiet"]) == 0
    assert "events" in capsys.readouterr().out
    with gzip.open(out, "rb") as fh:
        assert fh.read(1) == b"{"


@pytest.mark.parametrize(
    ("text", "value"),
    [("1000", 1000), ("1e6", 10**6), ("1M", 10**6), ("1G", 10**9), ("1GiB", 2**30), ("2.5k", 2500)],
)
def test_parse_amount(text: str, value: int) -> None:
    assert parse_amount(text) == value
