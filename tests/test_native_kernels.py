"""The native kernels (``ctda_native``, Rust) against numba's compilation of the same loops.

Every kernel with a native twin must give what numba gives, bit for bit: the engine is run
both ways on real traces and everything the kernels feed is compared, and each kernel is
called directly, both ways, on edge cases and on random input built the way the engine
builds it. ``ctda analyze`` with the extension built must not import numba at all.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ctda import kernels
from ctda.analysis.engine import Analysis, analyze
from ctda.ingest.reader import read_trace
from ctda.whatif.invariant import chains, device_floor, waits_of
from ctda.whatif.scenario import retime
from ctda.whatif.selfcheck import check, floor_check

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent
#: CPU with data-loader threads, GPU (several streams), a DDP rank with host contention
TRACES = (
    "kineto/resnet50_nw0_2020_bare_list.json.gz",
    "hta/rocm62_mi250_minitoy_train.json.gz",
    "multirank/g_ddp_ws2_compute30_r1/rank0.pt.trace.json.gz",
)
#: the modules declaring the kernels the analysis runs
MODULES = (
    "ctda.analysis.attribution",
    "ctda.analysis.calibrate",
    "ctda.analysis.classify",
    "ctda.analysis.contention",
    "ctda.analysis.graph",
    "ctda.analysis.intervals",
    "ctda.analysis.propagate",
    "ctda.analysis.rules.cross_thread",
    "ctda.analysis.rules.timeline",
    "ctda.analysis.rules.wake",
    "ctda.whatif.invariant",
    "ctda.whatif.scenario",
    "ctda.job.segments",
)
SKIP = "native kernels not built (make builds the extension from native/ when cargo is found)"
pytestmark = pytest.mark.skipif(not kernels.native_built(), reason=SKIP)


@pytest.fixture(autouse=True)
def _unbind() -> Iterator[None]:
    """Every test leaves the kernels unbound (numba's compilations rebind names in their
    modules until then)."""
    yield
    kernels.reset()


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Switch the kernels: ``native`` or ``numba`` (each kernel binds again on its next call)."""

    def use(name: str) -> None:
        monkeypatch.setenv(kernels.KERNELS_ENV, name)
        kernels.reset()

    return use


def _results(a: Analysis) -> dict[str, Any]:
    """What the kernels feed, from an analysis: graph, weights, timing, charges, contention,
    the self-check and the device-work floor under a scenario."""
    g, tm, c = a.graph, a.timing, a.contention
    out: dict[str, Any] = {
        k: getattr(g, k) for k in ("src", "dst", "etype", "owner", "rule", "order", "in_ptr", "out_edges")
    }
    out |= {"weight": a.calibration.weight, "binding": a.calibration.binding}
    out |= {"time": tm.time, "binding_edge": tm.binding_edge, "path": tm.path, "slack": tm.slack}
    out |= {f"contention.{k}": getattr(c, k) for k in c.__dataclass_fields__}
    out["event_cls"] = a.event_cls
    out["charges"] = a.charges
    out["selfcheck"] = check(a).pairs
    fc = floor_check(a)
    out["floor_check"] = (fc.predictions, fc.windows, fc.bound, fc.violations)
    factor = np.where(a.nodes.is_gpu, 0.5, 1.5)  # retime: scaled weights, contention re-weighed
    w, timing = retime(a, factor)
    out["retimed"] = (w, timing.time, timing.binding_edge)
    out["floor"] = device_floor(a, w, timing, waits_of(a), chains(a)).table
    return out


def _same(x: Any, y: Any, what: str) -> None:
    if isinstance(x, pd.DataFrame):
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=what)
    elif isinstance(x, tuple):
        assert isinstance(y, tuple) and len(x) == len(y), what
        for i, (a, b) in enumerate(zip(x, y)):
            _same(a, b, f"{what}[{i}]")
    elif isinstance(x, np.ndarray):
        assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, what
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), what
    else:
        assert type(x) is type(y) and (x == y or (x != x and y != y)), f"{what}: {x!r} != {y!r}"


@pytest.mark.parametrize("trace", TRACES)
def test_engine_is_identical_with_native_and_numba_kernels(
    trace: str, backend: Callable[[str], None]
) -> None:
    got = {}
    for name in ("native", "numba"):
        backend(name)
        got[name] = _results(analyze(read_trace(DATA / trace)))
        assert set(kernels.bound().values()) == {name}, kernels.bound()
    for key, value in got["native"].items():
        _same(value, got["numba"][key], key)


# --- each kernel called directly --------------------------------------------------------------


def _csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable").astype(np.int64)
    return np.searchsorted(keys[order], np.arange(n + 1)).astype(np.int64), order


def _i64(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.int64)


def _dag(rng: np.random.Generator, n: int, m: int) -> dict[str, np.ndarray]:
    """A random DAG in the engine's layout: edges from lower to higher node ids, node 0 the
    source, CSR indexes of both directions, and times with ties."""
    src = rng.integers(0, max(n - 1, 1), m)
    dst = np.minimum(src + 1 + rng.integers(0, 5, m), n - 1)
    keep = src < dst
    src, dst = _i64(src[keep]), _i64(dst[keep])
    d = {"src": src, "dst": dst, "weight": _i64(rng.integers(-3, 40, len(src)))}
    d["in_ptr"], d["in_edges"] = _csr(dst, n)
    d["out_ptr"], d["out_edges"] = _csr(src, n)
    d["etype"] = rng.integers(0, 11, len(src)).astype(np.int8)
    d["time"] = _i64(np.sort(rng.integers(0, 50, n)))
    return d


def _intervals(rng: np.random.Generator, k: int, span: int = 200) -> tuple[np.ndarray, np.ndarray]:
    t0 = _i64(np.sort(rng.integers(0, span, k)))
    return t0, t0 + rng.integers(0, 30, k)


def _walked(d: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Times and binding edges of the kind a forward pass leaves (each node's last in-edge)."""
    time, bind = d["time"].copy(), np.full(n + 1, -1, dtype=np.int64)
    for v in range(1, n + 1):
        ins = d["in_edges"][d["in_ptr"][v] : d["in_ptr"][v + 1]]
        if len(ins):
            bind[v] = ins[-1]
            time[v] = time[d["src"][ins[-1]]] + max(int(d["weight"][ins[-1]]), 0)
    return time, bind


def _contention(
    rng: np.random.Generator, m: int, k: int
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Random (wait, hold, overlap, loop) triples over ``m`` edges and two loops' edges."""
    hi = max(m, 1)
    triples = tuple(_i64(rng.integers(lo, top, k)) for lo, top in ((0, hi), (0, hi), (0, 60), (-1, 2)))
    loops = (_i64(rng.integers(0, hi, k)), _i64(rng.integers(0, 2, k)), rng.random(k) * 100)
    if not m:  # no edges: no triples
        triples, loops = tuple(t[:0] for t in triples), tuple(a[:0] for a in loops)
    return triples, (*loops, rng.random(2) * 50)


def _boundaries(rng: np.random.Generator, k: int) -> tuple[np.ndarray, ...]:
    """Event boundaries of four threads in two processes, ordered by (process, time)."""
    node, lane, time = (
        _i64(rng.integers(0, 99, k)),
        _i64(rng.integers(0, 4, k)),
        _i64(rng.integers(0, 30 * k, k)),
    )
    order = np.lexsort((time, lane // 2))
    return node[order], lane[order], time[order], lane[order] // 2


def _cases(rng: np.random.Generator, size: int) -> dict[str, tuple[Any, ...]]:
    """Arguments for each kernel (by native name), of about ``size`` elements (0 and 1 too)."""
    n, k = max(size, 1), 2 * size
    d = _dag(rng, n + 1, 3 * size)
    m = len(d["src"])
    src, etype, weight = d["src"], d["etype"], d["weight"]
    # a forest for the nesting kernel: parents come first, depth one more than the parent's
    parent = _i64([rng.integers(-1, i) if i else -1 for i in range(size)])
    depth = np.zeros(size, dtype=np.int64)
    for i in range(size):
        depth[i] = depth[parent[i]] + 1 if parent[i] >= 0 else 0
    time, bind = _walked(d, n)
    ends = _i64(rng.integers(0, n + 1, min(size, 5)))
    lo = time[ends] - 40
    chain = kernels_by_name()["propagate_backtrack_chains"].native()(bind, src, time, ends, lo)  # type: ignore[misc]
    a0, a1 = _intervals(rng, size)
    b0, b1 = _intervals(rng, k)
    lane = _i64(np.sort(rng.integers(0, 3, k)))
    node = _i64(2 * rng.permutation(np.repeat(np.arange(size), 2)) + np.arange(k) % 2)  # ends unopened too
    owner = _i64(rng.integers(-1, n, m))
    factor = rng.choice([0.5, 1.0, 1.5, 2.5, 0.25], n)
    grouped = _i64(rng.integers(0, 1 + size // 20, m))  # sources with more than 16 edges too
    notify = np.concatenate([np.sort(rng.integers(0, 200, size)), np.sort(rng.integers(0, 200, size))])
    p = _i64(rng.integers(0, n, size))
    ints = lambda hi, count=size: _i64(rng.integers(0, hi, count))  # noqa: E731
    by_time = _i64(np.argsort(d["time"], kind="stable"))
    order = np.arange(n + 1, dtype=np.int64)
    stop = rng.random(n + 1) < 0.1
    return {
        "graph_counting_sort": (ints(n), n),
        "graph_first_pairs": (_csr(grouped, n + 1)[1], grouped, ints(4, m)),
        "graph_kahn": (d["out_ptr"], d["out_edges"], d["dst"], np.diff(d["in_ptr"]), d["time"], by_time),
        "calibrate_last_arrivals": (d["in_ptr"], d["in_edges"], ints(5, m), ints(3, m)),
        "classify_inherit_levels": (rng.random(size) < 0.2, parent, depth),
        "propagate_rank": (etype, rng.random(m) < 0.5, _i64(rng.permutation(11))),
        "propagate_backtrack_chains": (bind, src, time, ends, lo),
        "propagate_backtrack_until": (bind, src, time, n, int(time[0]) + 3),
        "propagate_slack": (order, d["out_ptr"], d["out_edges"], d["dst"], weight, time, ends),
        "attribution_clip_chains": (
            *chain,
            lo,
            time[ends],
            etype,
            ints(9, m).astype(np.int16),
            owner,
            (np.arange(n) % 7).astype(np.int8),
            np.arange(11, dtype=np.int8),
        ),
        "intervals_intersect": (a0, a1, b0, b1),
        "intervals_overlap_sums": (a0, a1, b0, b1),
        "timeline_walk": (node, lane),
        "wake_match": (
            *_intervals(rng, size),
            ints(3),
            ints(2),
            _i64(notify),
            ints(3, k),
            _i64([0, size, k]),
        ),
        "cross_thread_deepest_containing": (a0, a1, depth, _i64(np.arange(size)), *_intervals(rng, size)),
        "cross_thread_handoffs": (*_boundaries(rng, k), rng.random(k) < 0.5, rng.random(k) < 0.3, 5, 20),
        "cross_thread_lock_pairs": (_i64(np.arange(size)), a0, a1, ints(3), 4),
        "contention_reweigh": (weight, factor, owner, *_contention(rng, m, k)),
        "scenario_scaled": (_i64(rng.integers(-9, 99, m)), factor, owner),
        "scenario_scaled_total": (_i64(rng.integers(-9, 99, m)), factor, owner),
        "invariant_chain_starts": (p, np.maximum(p - rng.integers(0, 4, size), -1), ints(9), 4),
        "segments_junctions": (bind, src, ends, stop),
        "segments_walk": (bind, src, time, _i64(rng.integers(0, n + 1, size)), stop, rng.random(size) < 0.2),
    }


def kernels_by_name() -> dict[str, kernels.Kernel]:
    for module in MODULES:
        importlib.import_module(module)
    return {k.native_name: k for k in kernels._native_kernels()}


def test_every_native_kernel_is_checked_here() -> None:
    assert {*_cases(np.random.default_rng(0), 3), "propagate_forward"} == set(kernels_by_name())
    # and named in the list ``ctda --version`` checks before any kernel's module is loaded
    assert set(kernels.TWINS) == set(kernels_by_name()) and len(kernels.TWINS) == len(set(kernels.TWINS))


def test_a_build_lacking_a_twin_is_not_called_native(monkeypatch: pytest.MonkeyPatch) -> None:
    ext = kernels.extension()
    assert kernels.native_built() and "native" in kernels.kernels_name()
    monkeypatch.delattr(ext, "wake_match")
    assert not kernels.native_built() and kernels.kernels_name().startswith("numba where")


def test_numba_compiles_again_after_a_reset(backend: Callable[[str], None]) -> None:
    """A kernel numba compiled, unbound by ``reset``, compiles other argument types later:
    the kernels it calls are numba's again when it does (they were put back by the reset)."""
    from ctda.analysis import propagate

    bind = np.array([-1, 0, 1], dtype=np.int64)
    src = np.array([0, 1], dtype=np.int64)
    time = np.array([0, 5, 9], dtype=np.int64)
    ends, limit = np.array([2], dtype=np.int64), np.array([0], dtype=np.int64)
    backend("numba")
    want = propagate.backtrack_chains(bind, src, time, ends, limit)
    backend("native")
    assert isinstance(propagate._walk_into, kernels.Kernel)  # put back by the reset
    # compiling anew (another dtype; numba's on-disk cache may hold it, so ask directly)
    propagate.backtrack_chains.numba()
    assert not isinstance(propagate._walk_into, kernels.Kernel)  # numba's again
    got = propagate.backtrack_chains(bind.astype(np.int32), src.astype(np.int32), time, ends, limit)
    _same(got, want, "backtrack_chains of int32 after a reset")
    assert propagate.backtrack_chains.backend == "native"  # bound natively; int32 went to numba


def test_a_job_is_identical_with_native_and_numba_kernels(backend: Callable[[str], None]) -> None:
    """A job's skeletons walk each rank's path segments with their own loops: the job's
    steps, paths, waits and stragglers are the same either way."""
    from ctda.job.run import analyze_job

    job = {}
    for name in ("native", "numba"):
        backend(name)
        job[name] = analyze_job([DATA / "multirank" / "g_ddp_ws2_compute30_r1"], executor="serial")
        assert kernels.bound()["ctda.job.segments._walk"] == name
    for table in ("steps", "paths", "waits", "late", "stragglers"):
        pd.testing.assert_frame_equal(getattr(job["native"], table), getattr(job["numba"], table))
    assert len(job["native"].paths) > 100


@pytest.mark.parametrize("size", [0, 1, 2, 40, 300])
def test_each_kernel_matches_numba(size: int) -> None:
    for seed in range(3):
        for name, args in _cases(np.random.default_rng(seed * 1000 + size), size).items():
            k = kernels_by_name()[name]
            want, got = k.numba()(*args), k.native()(*args)  # type: ignore[misc]
            _same(got, want, f"{name} (size {size}, seed {seed})")


@pytest.mark.parametrize("span", [(0, 0), (0, 1), (3, 9), (0, 41), (9, 3)])
def test_forward_writes_only_its_span(span: tuple[int, int]) -> None:
    """``_forward`` fills ``time`` and ``bind`` in place at the positions ``k0:k1`` only."""
    k = kernels_by_name()["propagate_forward"]
    d = _dag(np.random.default_rng(7), 41, 120)
    rank = np.random.default_rng(8).integers(0, 3, len(d["src"])).astype(np.int64)
    order = np.arange(41, dtype=np.int64)
    outs = []
    for fn in (k.native(), k.numba()):
        time, bind = np.full(41, 5, dtype=np.int64), np.full(41, -7, dtype=np.int64)
        assert fn is not None
        fn(order, d["in_ptr"], d["in_edges"], d["src"], d["weight"], rank, 0, 11, time, bind, *span)
        outs.append((time, bind))
    _same(outs[0], outs[1], f"forward {span}")
    time, bind = outs[0]
    outside = np.ones(41, dtype=bool)
    outside[span[0] : span[1]] = False
    assert (time[outside] == 5).all() and (bind[outside] == -7).all()


def test_rounding_is_half_to_even_and_out_of_range_as_numba() -> None:
    k = kernels_by_name()["scenario_scaled"]
    weight = np.array([1, 3, 5, -1, -3, 7, 2**62, 9], dtype=np.int64)
    factor = np.array([0.5, 1e300, np.nan], dtype=np.float64)
    owner = np.array([0, 0, 0, 0, 0, -1, 1, 2], dtype=np.int64)
    got = k.native()(weight, factor, owner)  # type: ignore[misc]
    assert got.tolist()[:6] == [0, 2, 2, 0, -2, 7]  # rint: halves to the even neighbour
    _same(got, k.numba()(weight, factor, owner), "scaled")


def test_a_kernel_missing_from_the_extension_falls_back_to_numba() -> None:
    """A build from older sources lacks the newer kernels: those bind to numba, one by one."""

    @kernels.kernel
    def _not_in_any_build(a):  # type: ignore[no-untyped-def]  # pragma: no cover
        return a + 1

    try:
        assert _not_in_any_build.native() is None
        assert _not_in_any_build(np.int64(41)) == 42 and _not_in_any_build.backend == "numba"
    finally:
        kernels._ALL.remove(_not_in_any_build)


def test_arguments_the_twin_does_not_take_go_to_numba() -> None:
    """numba compiles for any dtype; the twins take the engine's: others go to numba."""
    k = kernels_by_name()["intervals_overlap_sums"]
    a0, a1, b0, b1 = (np.array(v, dtype=np.int32) for v in ([0, 10], [8, 20], [5, 6], [9, 30]))
    _same(k(a0, a1, b0, b1), k.numba()(a0, a1, b0, b1), "overlap_sums of int32")
    assert k(a0, a1, b0, b1).tolist() == [5, 10]


def test_analyze_and_ingest_import_no_numba(tmp_path: Path) -> None:
    """``ctda analyze`` (ctda mode, text and JSON) and ``ctda ingest`` run every kernel
    natively: numba, its import and its cached code's loading, stay out of the process
    (ingest also documents HTA mode's rules in the store: their module declares its
    kernels without compiling them)."""
    code = (  # at the end: after teardown, or before analyze's quick exit (ctda/cli/ending.py)
        "import atexit, os, sys\n"
        "def said():\n"
        "    print('numba loaded:', 'numba' in sys.modules)\n"
        "atexit.register(said)\n"
        "end = os._exit\n"
        "def ending(code):\n"
        "    said()\n"
        "    sys.stdout.flush()\n"
        "    end(code)\n"
        "os._exit = ending\n"
        "from ctda.cli.start import main\n"
        "main()\n"
    )
    trace = str(DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz")
    env = {k: v for k, v in os.environ.items() if k != kernels.KERNELS_ENV}
    for args in (
        ["analyze", trace],
        ["analyze", trace, "--format", "json"],
        ["ingest", trace, "--db", str(tmp_path / "store")],
    ):
        run = subprocess.run(
            [sys.executable, "-c", code, *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.rstrip().endswith("numba loaded: False"), run.stdout[-400:]
