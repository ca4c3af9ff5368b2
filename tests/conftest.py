"""Shared fixtures: the shipped small traces and, where present, the shared real corpus."""

from __future__ import annotations

import csv
import dataclasses
import functools
import inspect
import json
import os
import re
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
DATA = HERE / "data"
# what ctda keeps between processes (the runs listings of ``ctda.store.listing``) goes to a
# directory of this test process's own, not the user's cache; children (CLIs, UI servers) inherit it
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ctda-test-cache-")


def _corpus_dir() -> Path | None:
    """The shared trace corpus: $CTDA_TRACE_CORPUS, else ../shared/traces beside the repo."""
    env = os.environ.get("CTDA_TRACE_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(HERE.parent.parent / "shared" / "traces")
    for c in candidates:
        if (c / "MANIFEST.tsv").is_file():
            return c
    return None


CORPUS = _corpus_dir()
SKIP_CORPUS = pytest.mark.skipif(
    CORPUS is None,
    reason="shared trace corpus not found (set CTDA_TRACE_CORPUS or place it at ../shared/traces)",
)


#: the skip reason of tests comparing the native reader with the Python one
NATIVE_SKIP = "native reader extension not built (make builds it from native/ when cargo is found)"


def manifest_rows() -> list[dict[str, str]]:
    """Rows of MANIFEST.tsv (empty when the corpus is absent)."""
    if CORPUS is None:
        return []
    with (CORPUS / "MANIFEST.tsv").open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def corpus_traces() -> list[Path]:
    """Every real trace in the corpus: MANIFEST rows plus the generated CPU traces."""
    if CORPUS is None:
        return []
    paths = [CORPUS / r["path"] for r in manifest_rows()]
    paths += sorted((CORPUS / "generated").glob("*.json.gz"))
    return paths


#: the helpers below: the tests that call them with a corpus trace run by trace on one worker
SHARED_TRACE = frozenset({"corpus_table", "corpus_analysis"})


@functools.cache
def corpus_table(path: Path) -> Any:
    """``read_trace(path)`` once per process for every module checking a real trace (each
    trace's tests share a worker, see :func:`analysis_group`); not to be changed."""
    from ctda.ingest.reader import read_trace

    return read_trace(path)


@functools.cache
def corpus_analysis(path: Path) -> Any:
    """``analyze(read_trace(path))`` once per process for every module checking a real trace's
    analysis (each trace's tests share a worker, see :func:`analysis_group`): the read and the
    analysis of the whole corpus cost about 20 s of CPU, paid once instead of once per module
    and worker."""
    from ctda.analysis.engine import analyze

    return analyze(corpus_table(path))


def axis_labels(axis: dict[str, Any]) -> list[str]:
    """The labels a canvas timeline's row axis shows, in the order of its ``values``: its
    label expression maps each value to a label (``datum.value === v ? "label" : ...``)."""
    found = re.findall(r'datum\.value === ([-0-9.e]+) \? ("(?:[^"\\]|\\.)*")', axis["labelExpr"])
    labels = {float(v): json.loads(text) for v, text in found}
    return [labels[float(v)] for v in axis["values"]]


# --- test tiers --------------------------------------------------------------------------
# Every test is sorted into the tiers here, from what it uses, so that no test file declares
# its own tier and a new file is classified the moment it is written:
#
# * ``neo4j``   -- it needs the ``neo4j_server`` fixture (as an argument, or through
#   ``request.getfixturevalue("neo4j_server")`` in its code or in a fixture it uses; a case
#   parametrised over store kinds needs it only when its kind is ``neo4j``);
# * ``browser`` -- it needs the ``browser_paths`` fixture (a real Chromium);
# * ``corpus``  -- it reads the shared real-trace corpus: the ``SKIP_CORPUS`` mark or any skip
#   naming the corpus, ``CORPUS`` / ``corpus_traces`` / ``manifest_rows`` in its code, its
#   fixtures' or its module's helpers' code, or a parameter or module constant under ``CORPUS``;
# * ``slow``    -- it starts processes (``subprocess``/``Popen`` in the same code; but for the
#   few quick ones named in ``QUICK_PROCESS``), or is one of the long in-process tests in ``LONG``.
#
# ``make test`` runs ``-m "not neo4j and not browser and not corpus and not slow"``;
# ``make test-all`` runs everything with the corpus, Neo4j and Chromium required.

SERVER_FIXTURE = "neo4j_server"
BROWSER_FIXTURE = "browser_paths"
CORPUS_WORDS = frozenset({"CORPUS", "corpus_traces", "manifest_rows", "SKIP_CORPUS"})
PROCESS_WORDS = frozenset({"subprocess", "Popen"})
STORE_KINDS = frozenset({"ladybug", "neo4j"})
# In-process tests long enough (> ~7 s on two cores) to leave the fast tier: node-id prefixes.
LONG: tuple[str, ...] = (
    # every shipped trace through the embedded store (the other store tests cover each step)
    "tests/test_store_suite.py::test_shipped_traces_match_analyze[ladybug]",
    # every named query on the embedded store (test_api and test_hostile_queries keep a few)
    "tests/test_store_cli.py::test_query_named_and_cypher[ladybug]",
    # the bench harnesses: every UI page timed, a replicated trace read back
    "tests/test_ui_bench.py::test_measure_every_page",
    "tests/test_bench_replicate.py::test_bare_list_trace",
)


#: tests that start a process but finish in about a second (a bare interpreter importing the
#: command line), kept in the fast tier: node-id prefixes
QUICK_PROCESS: tuple[str, ...] = (
    "tests/test_startup.py::test_building_the_cli_loads_no_engine",
    # ``ctda analyze`` of a tiny trace twice and its ingest: that they import no numba (~3 s)
    "tests/test_native_kernels.py::test_analyze_and_ingest_import_no_numba",
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip() == "1"


def _code_words(code: types.CodeType) -> set[str]:
    """Global names and string constants a code object mentions, nested functions included."""
    words = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, str):
            words.add(const)
        elif isinstance(const, types.CodeType):
            words |= _code_words(const)
    return words


def _reach(fn: Any, seen: set[int] | None = None) -> tuple[set[str], list[Any]]:
    """The words of ``fn`` and of every same-module function it names, and the module-level
    values (constants) those name: what the test's code can touch without a fixture."""
    seen = set() if seen is None else seen
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen:
        return set(), []
    seen.add(id(fn))
    words = _code_words(code)
    values: list[Any] = []
    module = getattr(fn, "__module__", None)
    for name in words & set(getattr(fn, "__globals__", {})):
        value = fn.__globals__[name]
        if inspect.isfunction(value) and value.__module__ == module:
            more, vals = _reach(value, seen)
            words |= more
            values += vals
        elif not inspect.ismodule(value) and not inspect.isclass(value):
            values.append(value)
    return words, values


def _under_corpus(value: Any, depth: int = 0) -> bool:
    """Whether a parameter or constant is a path in the corpus (or holds one)."""
    if CORPUS is None or depth > 2:
        return False
    if isinstance(value, (str, os.PathLike)):
        return str(value).startswith(str(CORPUS))
    if isinstance(value, (list, tuple)):
        return any(_under_corpus(v, depth + 1) for v in value[:64])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_under_corpus(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


def _kinds(item: pytest.Item) -> set[str]:
    """The store kinds an item is parametrised with (empty when none)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {v for v in params.values() if isinstance(v, str) and v in STORE_KINDS}


@functools.cache  # asked for by the tiers and by the xdist groups, once per test
def _item_reach(item: pytest.Item) -> tuple[set[str], list[Any]]:
    """:func:`_reach` of the test's function and of every fixture it uses (not to be changed:
    the answer is shared)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in info.name2fixturedefs.items() if info else ():
        if name in fixtures:
            funcs += [d.func for d in defs]
    words: set[str] = set()
    values: list[Any] = []
    for fn in funcs:
        if fn is not None:
            more, vals = _reach(fn)
            words |= more
            values += vals
    return words, values


def tiers_of(item: pytest.Item) -> set[str]:
    """The tier marks ``item`` gets (see the comment above)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    words, values = _item_reach(item)
    params = list(getattr(getattr(item, "callspec", None), "params", {}).values())
    tiers: set[str] = set()
    kinds = _kinds(item)
    if SERVER_FIXTURE in fixtures or (SERVER_FIXTURE in words and (not kinds or "neo4j" in kinds)):
        tiers.add("neo4j")
    if BROWSER_FIXTURE in fixtures:
        tiers.add("browser")
    skips = [str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")]
    if (
        words & CORPUS_WORDS
        or any("corpus" in r for r in skips)
        or any(_under_corpus(v) for v in (*params, *values))
    ):
        tiers.add("corpus")
    if (words & PROCESS_WORDS and not item.nodeid.startswith(QUICK_PROCESS)) or item.nodeid.startswith(LONG):
        tiers.add("slow")
    return tiers


# tryfirst: the marks are there before pytest-xdist's own hook reads them (on a worker it is
# registered after this file, so it would otherwise run first)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tiers = tiers_of(item)
        for tier in sorted(tiers):
            item.add_marker(getattr(pytest.mark, tier))
        # Under ``pytest-xdist --dist loadgroup`` a group runs on one worker: every Neo4j test
        # shares one worker, so the session starts one server, not one per worker; a module
        # whose tests share a module-scoped fixture keeps it on one worker (computed once).
        # Every other test is free to run wherever a worker is idle, which balances the tiers.
        if "neo4j" in tiers:
            item.add_marker(pytest.mark.xdist_group("neo4j"))
        elif group := analysis_group(item):
            item.add_marker(pytest.mark.xdist_group(group))
        elif shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items[:] = shared_ingest_last(items)


#: the helper (tests/test_store_suite.py) that ingests the shipped traces into the session's
#: Neo4j server once for every test that reads them
SHARED_INGEST = "shipped_in_neo4j"


def shared_ingest_last(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the Neo4j tests that read the shared ingest (:data:`SHARED_INGEST`)
    moved, in their order, behind every other Neo4j test (they all run on one worker, in
    this order): no test empties the server between two of them, which would make the next
    one ingest everything again, nor after them, which costs about as much as the ingest."""
    neo4j = [i for i in items if i.get_closest_marker("neo4j") is not None]
    readers = [i for i in neo4j if SHARED_INGEST in _item_reach(i)[0]]
    if not readers:
        return items
    moved = set(map(id, readers))
    rest = [i for i in items if id(i) not in moved]
    last = max((k for k, i in enumerate(rest) if i.get_closest_marker("neo4j") is not None), default=-1)
    return rest[: last + 1] + readers + rest[last + 1 :]


def analysis_group(item: pytest.Item) -> str | None:
    """The group of a test that reads the shared table or analysis (:data:`SHARED_TRACE`) of
    the corpus trace it is parametrised with (a path, or a MANIFEST row): one per trace, so
    that the trace's tests of every module run on the worker that reads it, and the traces
    still spread over the workers."""
    if CORPUS is None or not SHARED_TRACE & _item_reach(item)[0]:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {}).values()
    rows = [CORPUS / v["path"] for v in params if isinstance(v, dict) and isinstance(v.get("path"), str)]
    paths = [Path(v) for v in params if isinstance(v, (str, os.PathLike)) and _under_corpus(v)] + rows
    return f"analysis:{paths[0].relative_to(CORPUS)}" if paths else None


def shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture computed once per module, class or package (one a
    worker would compute again if the module's tests were spread over workers): one in its
    fixture closure, or one its module defines (a test may ask for it by name at run time,
    ``request.getfixturevalue``, which no closure shows)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is not None and any(
        defs and defs[-1].scope in ("class", "module", "package") for defs in info.name2fixturedefs.values()
    ):
        return True
    return defines_a_shared_fixture(str(item.path))


@functools.cache
def defines_a_shared_fixture(path: str) -> bool:
    """Whether the test module at ``path`` declares a module-, class- or package-scoped fixture."""
    return SHARED_SCOPE.search(Path(path).read_text(encoding="utf-8")) is not None


SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](?:module|class|package)["']""")


def xdist_group_suffix(item: pytest.Item) -> str:
    """The ``@group`` that pytest-xdist's loadgroup expects at the end of a grouped test's id
    ("" for a test without an ``xdist_group`` mark)."""
    names = sorted(
        {
            str(m.args[0] if m.args else m.kwargs.get("name", "default"))
            for m in item.iter_markers("xdist_group")
        }
    )
    return f"@{'_'.join(names)}" if names else ""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Give every grouped test its ``@group`` id suffix where pytest-xdist could not.

    An xdist worker tells the scheduler a test's group only through that suffix, which it
    appends to ``item._nodeid``; from pytest 9.2 a node keeps its id in ``item._id``, so the
    suffix is lost (pytest-xdist issue 1386): every test then becomes its own work unit, a
    module's tests are spread over both workers (its module-scoped fixtures computed on
    each) and each worker starts its own Neo4j server. Runs after every
    ``pytest_collection_modifyitems`` and before the worker sends the ids (tryfirst).
    """
    if not getattr(session.config.option, "loadgroup", False):
        return
    for item in session.items:
        suffix = xdist_group_suffix(item)
        if suffix and not item.nodeid.endswith(suffix):
            node: Any = item
            nodeid = item.nodeid + suffix
            node._nodeid = nodeid  # pytest < 9.2
            if hasattr(node, "_id"):  # pytest >= 9.2: a structured id
                node._id = type(node._id).parse(nodeid)
            assert item.nodeid == nodeid, f"cannot give {item.nodeid!r} its xdist group"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """With ``CTDA_REQUIRE_CORPUS=1`` (CI) a skip for want of the corpus is a failure, and with
    ``CTDA_REQUIRE_NATIVE=1`` one for want of the native reader."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _flag("CTDA_REQUIRE_CORPUS") and "corpus" in str(report.longrepr).lower():
        report.outcome = "failed"
        report.longrepr = f"{report.longrepr} -- but CTDA_REQUIRE_CORPUS=1, so this is a failure"
    elif report.skipped and _flag("CTDA_REQUIRE_NATIVE") and NATIVE_SKIP in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"{report.longrepr} -- but CTDA_REQUIRE_NATIVE=1, so this is a failure"
