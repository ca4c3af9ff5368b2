"""The contract every registered edge rule keeps, checked on every rule and small trace.

A rule returns one EdgeBatch of well-typed parallel arrays over real event nodes; its edges
point forward in time (the graph builder would drop the others); an edge it charges to an
event lies inside that event; it is deterministic; and its docstring, which is the rule's
documentation everywhere, says which trace fields it reads. A new rule is covered as soon
as it is registered; the last test makes sure no rule goes untested for lack of edges.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import msgspec
import numpy as np
import pytest

from ctda.analysis import modes
from ctda.analysis.edges import EdgeBatch, EdgeType
from ctda.analysis.nodes import select
from ctda.analysis.rules import registry
from ctda.analysis.rules.context import RuleContext
from ctda.ingest.events import Args, Event
from ctda.ingest.reader import read_trace
from tests.synth import AUX, cpu, kernel, runtime, write

DATA = Path(__file__).parent / "data"
SHIPPED = sorted(p for p in DATA.glob("*/*.json.gz"))
RULES = modes.all_rules()
#: what a docstring may name as read: Kineto event keys and the ``args`` keys ctda decodes
FIELDS = {f.encode_name for f in msgspec.structs.fields(Event)} - {"args"}
ARG_KEYS = {f.encode_name for f in msgspec.structs.fields(Args)}


def _zoo(path: Path) -> Path:
    """Two threads and two streams: a cross-stream event wait with its ``cuda_sync``
    record, runtime calls overlapping across threads, and one thread's condition wait
    ended by the other's notify (times in µs)."""
    wait_record = kernel("Stream Wait Event", 16, 0, corr=3, stream=9)
    wait_record["cat"] = "cuda_sync"
    wait_record["args"] |= {
        "cuda_sync_kind": "Stream Wait Event",
        "wait_on_stream": 7,
        "wait_on_cuda_event_record_corr_id": 2,
    }
    events = [
        runtime("cudaLaunchKernel", 0, 10, corr=1),
        runtime("cudaMalloc", 5, 10, corr=90, tid=AUX),  # overlaps the launch: the runtime lock
        runtime("cudaEventRecord", 12, 2, corr=2),
        runtime("cudaStreamWaitEvent", 16, 3, corr=3, tid=AUX),
        runtime("cudaLaunchKernel", 20, 5, corr=4, tid=AUX),
        kernel("k_first", 15, 40, corr=1, stream=7),
        kernel("k_waiting", 60, 10, corr=4, stream=9),
        wait_record,
        cpu("threading.py(295): wait", 26, 14, tid=AUX, cat="python_function"),
        cpu("<built-in method acquire of _thread.lock object>", 27, 12, tid=AUX, cat="python_function"),
        cpu("threading.py(366): notify", 30, 4, cat="python_function"),
        cpu("<built-in method release of _thread.lock object>", 32, 1, cat="python_function"),
    ]
    return write(path, events)


@cache
def _trace(name: str, tmp: Path | None = None) -> tuple[RuleContext, dict[str, EdgeBatch]]:
    path = _zoo(tmp / "zoo.json") if tmp is not None else DATA / name
    table = read_trace(path)
    ctx = RuleContext(table, select(table))
    return ctx, {s.name: s(ctx) for s in RULES}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[RuleContext, dict[str, EdgeBatch]]:
    return _trace("zoo", tmp_path_factory.mktemp("zoo"))


def _traces(zoo: tuple[RuleContext, dict[str, EdgeBatch]]) -> list[tuple[RuleContext, dict[str, EdgeBatch]]]:
    return [zoo, *(_trace(str(p.relative_to(DATA))) for p in SHIPPED)]


def test_names_unique_and_families_known() -> None:
    names = [s.name for s in RULES]
    assert len(names) == len(set(names)) == len(registry.specs())
    assert {s.family for s in RULES} == set(registry.FAMILIES)
    # built-in edges are the graph builder's own, not rules
    assert not {"release", "terminal"} & set(names)


def test_declaring_a_name_twice_is_refused() -> None:
    spec = RULES[0]
    with pytest.raises(ValueError, match="declared twice"):
        registry.rule(spec.name, spec.family)(lambda ctx: EdgeBatch.of([], [], EdgeType.DURATION))
    with pytest.raises(ValueError, match="unknown family"):
        registry.rule("new_rule", "sideways")  # type: ignore[arg-type]
    registry.rule(spec.name, spec.family)(spec.fn)  # declaring the same function again is harmless


@pytest.mark.parametrize("spec", RULES, ids=lambda s: s.name)
def test_docstring_names_the_fields_it_reads(spec: registry.RuleSpec) -> None:
    doc = spec.doc
    assert doc and spec.summary and "\n" not in spec.summary
    assert "Reads" in doc, f"{spec.name}: say which trace fields the rule reads"
    named = set()
    for token in re.findall(r"``([^`]+)``", doc):
        for part in re.split(r"[/, ]", token):
            key = part.removeprefix("args.")
            if part in FIELDS or (part.startswith("args.") and key in ARG_KEYS) or part in ARG_KEYS:
                named.add(part)
    assert named, f"{spec.name}: its docstring names no trace field (``ts``, ``args.stream``, ...)"


@pytest.mark.parametrize("spec", RULES, ids=lambda s: s.name)
def test_rule_contract(spec: registry.RuleSpec, zoo: tuple[RuleContext, dict[str, EdgeBatch]]) -> None:
    for ctx, batches in _traces(zoo):
        n = ctx.nodes
        b = batches[spec.name]
        where = f"{spec.name} on {ctx.table.meta.path}"
        assert isinstance(b, EdgeBatch) and b.rule == spec.name, where
        for arr, dtype in ((b.src, np.int64), (b.dst, np.int64), (b.etype, np.int8), (b.owner, np.int64)):
            assert arr.dtype == dtype and arr.ndim == 1 and len(arr) == len(b.src), where
        # real event nodes only: SOURCE and SINK edges are the graph builder's
        assert ((b.src >= 0) & (b.src < 2 * n.n) & (b.dst >= 0) & (b.dst < 2 * n.n)).all(), where
        assert (b.src != b.dst).all(), where
        builtin = {int(EdgeType.RELEASE), int(EdgeType.TERMINAL)}
        assert set(np.unique(b.etype).tolist()) <= {int(t) for t in EdgeType} - builtin, where
        # forward in the observed timeline
        assert (n.time[b.dst] >= n.time[b.src]).all(), where
        # an edge charged to an event is part of that event's own time
        own = b.owner >= 0
        o = b.owner[own]
        assert (o < n.n).all(), where
        assert (n.ts[o] <= n.time[b.src[own]]).all() and (n.time[b.dst[own]] <= n.end[o]).all(), where
        again = spec(ctx)
        assert np.array_equal(again.src, b.src) and np.array_equal(again.dst, b.dst), where


def test_every_rule_is_exercised(zoo: tuple[RuleContext, dict[str, EdgeBatch]]) -> None:
    """Each rule finds edges on some trace above, so its contract check is not vacuous."""
    found = {name for _, batches in _traces(zoo) for name, b in batches.items() if len(b)}
    assert found == {s.name for s in RULES}


def test_zoo_edges(zoo: tuple[RuleContext, dict[str, EdgeBatch]]) -> None:
    """The rules no shipped trace exercises, on the hand-made trace, edge by edge."""
    ctx, batches = zoo
    n = ctx.nodes
    names = ctx.names.tolist()

    def node(name: str, end: bool) -> int:
        return 2 * names.index(name) + int(end)

    us = 1_000
    wait = batches["stream_wait_event"]
    assert list(zip(wait.src.tolist(), wait.dst.tolist())) == [
        (node("k_first", True), node("k_waiting", False))
    ]
    assert (n.time[wait.src], n.time[wait.dst]) == (55 * us, 60 * us)
    lock = batches["cuda_lock"]
    first_launch = 2 * int(np.flatnonzero(ctx.names == "cudaLaunchKernel")[0]) + 1
    assert list(zip(lock.src.tolist(), lock.dst.tolist())) == [(first_launch, node("cudaMalloc", True))]
    wake = batches["wake"]
    release, acquire = (
        "<built-in method release of _thread.lock object>",
        "<built-in method acquire of _thread.lock object>",
    )
    assert list(zip(wake.src.tolist(), wake.dst.tolist())) == [(node(release, False), node(acquire, True))]
    assert (n.time[wake.src], n.time[wake.dst]) == (32 * us, 39 * us)


def test_readme_rule_table_lists_the_registry() -> None:
    """The README's table of rules names every rule ctda's mode runs, in the order the
    engine runs them, and nothing else: a rule added to the registry fails here until the
    table documents it."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    table = readme.split("| rule | edge | from the trace |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)
    ctda_mode = modes.get("ctda")
    assert listed == [s.name for s in ctda_mode.rules(ctda_mode.selectable)]
