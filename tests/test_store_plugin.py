"""A store backend written from the contract alone, installed as a plugin.

The backend below implements only the abstract methods of
:class:`ctda.store.contract.Engine` (nothing borrowed from the built-in backends) on an
in-memory Ladybug database per ``memory://NAME``, and is found the way a third-party
package's would be: a distribution on ``sys.path`` whose ``entry_points.txt`` declares it
in the ``ctda.stores`` group. The whole store life cycle then runs on it through the API:
ingest, listing, the stored report, a named and a typed-in query, deletion.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ctda
from ctda.queries.loader import QueryError
from ctda.store import backends
from tests.plugin_dist import installed

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "data" / "hta" / "simple_add_param_benchmark.json.gz"
EVENTS = 796  # what the embedded store records for SMALL

PLUGIN = """
from typing import Any

import ladybug

from ctda.queries.limits import QueryLimits
from ctda.store.base import QueryResult, Store
from ctda.store.faults import StoreError

_DATABASES: dict[str, Any] = {}  # memory://NAME -> its database, for the process' lifetime


def _plain(value):
    if type(value).__name__ == "Decimal":  # integer sums come back as INT128
        return int(value)
    return [_plain(v) for v in value] if isinstance(value, list) else value


class MemoryStore(Store):
    kind = "memory"
    title = "In-memory"
    dialect = "ladybug"  # it speaks Ladybug's Cypher: the named queries' ladybug variants
    schemes = ("memory",)
    read_procedures = frozenset({"show_tables"})
    isolated_queries = False  # the data lives in this process

    def __init__(self, name: str, read_only: bool) -> None:
        self.name, self.read_only = name, read_only
        fresh = name not in _DATABASES
        if fresh:
            _DATABASES[name] = ladybug.Database(":memory:")
        self._conn = ladybug.Connection(_DATABASES[name])
        if fresh:
            self._ensure_schema()

    @classmethod
    def from_target(cls, target: Any, *, read_only: bool = False) -> "MemoryStore":
        return cls(target.location, read_only)

    @property
    def location(self) -> str:
        return self.name

    def _run(self, text: str, params: dict[str, Any] | None = None) -> QueryResult:
        try:
            res = self._conn.execute(text, params or {})
        except RuntimeError as exc:
            raise StoreError(str(exc).splitlines()[0]) from None
        return QueryResult(list(res.get_column_names()), [_plain(list(r)) for r in res.get_all()])

    def _read(self, text, params=None):
        return self._run(text, params).records()

    _write = _read

    def _transaction(self, work):
        self._conn.execute("BEGIN TRANSACTION")
        try:
            out = work(self._write)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return out

    def _ddl(self) -> list[str]:
        from ctda.store import schema

        out = []
        for label in schema.NODES + schema.RELS:
            cols = ", ".join(f"{p} {t}" for p, t in label.props)
            if label.ends is None:
                out.append(f"CREATE NODE TABLE {label.name}({cols}, PRIMARY KEY ({label.key}))")
            else:
                ends = f"FROM {label.ends[0]} TO {label.ends[1]}"
                out.append(f"CREATE REL TABLE {label.name}({ends}{', ' + cols if cols else ''})")
        return out

    def _add_nodes(self, label, rows) -> None:
        if rows.num_rows:
            self._conn.execute(f"COPY {label.name} FROM $rows", {"rows": rows})

    _add_rels = _add_nodes  # COPY either way: the endpoints' keys lead the rows

    def _check_plan(self, text, params, level) -> None:
        self._run("EXPLAIN " + text, params)  # it must at least plan

    def _query(self, text, params, write, limits: QueryLimits | None = None) -> QueryResult:
        result = self._run(text, params)
        if limits is not None and len(result.rows) > limits.max_rows:
            raise limits.too_many_rows()
        return result

    def close(self) -> None:
        self._conn.close()
"""


@pytest.fixture
def memory_backend(tmp_path: Path) -> Iterator[None]:
    """The plugin installed as a distribution on sys.path, then removed again."""
    backends._LOADED = False
    try:
        with installed(
            tmp_path, "ctda_memstore", PLUGIN, "ctda.stores", "memory = ctda_memstore:MemoryStore\n"
        ):
            yield
    finally:
        backends._BACKENDS.pop("memory", None)
        backends._LOADED = False


def test_a_backend_from_the_contract_alone_runs_the_store_life_cycle(memory_backend: None) -> None:
    found = backends.backends()
    assert list(found)[:2] == ["ladybug", "neo4j"] and found["memory"].__module__ == "ctda_memstore"
    assert backends.for_scheme("memory") is found["memory"] and "ladybug" in backends.dialects()
    a = ctda.analyze(SMALL)
    with ctda.open_store("memory://plugin-test") as store:
        assert store.target.kind == "memory" and store.runs() == []
        (first,) = store.ingest(SMALL, run="small")
        assert first.stored and first.run.events == EVENTS
        assert [r.name for r in store.runs()] == ["small"]
        assert store.report("small").total_ns == ctda.report(a).total_ns > 0
        rows = store.query("hotspots_by_name", {"run": "small", "top": 2}).records()
        assert len(rows) == 2 and rows[0]["cp_ns"] >= rows[1]["cp_ns"] > 0
        counted = store.query("MATCH (r:Run) WHERE r.name = $n RETURN r.events AS n", {"n": "small"})
        assert counted.records() == [{"n": EVENTS}]
        # the gate asks the backend: its one read procedure passes, another is refused
        assert store.query("CALL show_tables() RETURN count(*) AS n").records()[0]["n"] > 10
        with pytest.raises(QueryError, match="refused CALL 'db_version'"):
            store.query("CALL db_version() RETURN *")
        store.rm("small")
        assert store.runs() == []
