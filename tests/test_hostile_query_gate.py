"""The query gates on their own, with no store: the tokenizer (the first filter) refuses
every hostile query of ``hostile_query_cases.py`` at read and write level, reads names and
comments as the engines do and bounds length and nesting; the plan check refuses every
operator, procedure and function outside its allow-lists on plans shaped as Neo4j reports
them; a query worker that dies ends in one line.

The same attacks on real stores, through the API, the UI console and the CLI, are in
``test_hostile_queries.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctda.queries import gate, loader, plan
from ctda.queries.limits import QueryLimits
from ctda.queries.worker import _death
from ctda.store import backends
from ctda.store.ladybug_store import LadybugStore
from ctda.store.neo4j_store import Neo4jStore
from tests.hostile_query_cases import BOMBS, BOUNDED, WRITES, attacks

pytest.importorskip("ladybug")


# --- the tokenizer (first filter), on its own -------------------------------------------


@pytest.mark.parametrize("dialect", ["ladybug", "neo4j"])
def test_tokenizer_refuses_every_attack_at_read_and_write(dialect: str, tmp_path: Path) -> None:
    cases = attacks("http://127.0.0.1:9/x", tmp_path / "f.csv")
    for name, text in cases.items():
        with pytest.raises(gate.GateError) as refused:
            gate.check(text, backends.by_kind(dialect), gate.Level.READ)
        assert "\n" not in str(refused.value), name
        if name not in WRITES:
            with pytest.raises(gate.GateError):
                gate.check(text, backends.by_kind(dialect), gate.Level.WRITE)
    gate.check(cases["write-without-flag"], backends.by_kind(dialect), gate.Level.WRITE)


def test_tokenizer_reads_names_and_comments_as_the_engines_do() -> None:
    toks = gate.tokenize("RETURN 1 // a\u2028CALL x")
    assert [t.text for t in toks] == ["RETURN", "1", "CALL", "x"]
    (quoted,) = [t for t in gate.tokenize("RETURN `ap``oc` AS x") if t.kind == "quoted"]
    assert gate.unquote(quoted) == "ap`oc"
    # the allowed pure functions pass in every context, spelled plainly
    gate.check("RETURN {a: apoc.convert.toJson([1])} AS m, date.truncate('day', date()) AS d", Neo4jStore)
    with pytest.raises(gate.GateError, match=r"apoc\.convert\.toJson"):  # quoted: never needed
        gate.check("RETURN `apoc`.convert.toJson([1]) AS j", Neo4jStore)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bounds_refuse_before_any_parser(name: str) -> None:
    with pytest.raises(gate.GateError, match=BOUNDED):
        gate.check(BOMBS[name], LadybugStore)


def test_named_queries_are_far_inside_the_bounds() -> None:
    for q in loader.load_all().values():
        for text in q.texts.values():
            toks = gate.tokenize(text)
            gate.check_bounds(toks)
            assert len(text) < gate.MAX_LENGTH // 10


# --- the plan check, on plans as the driver reports them --------------------------------


def test_plan_gate_checks_every_operator_procedure_and_function() -> None:
    """The plan check on plans as the driver reports them (shapes taken from Neo4j 5.26)."""

    def op(kind: str, details: str = "", *children: dict[str, Any]) -> dict[str, Any]:
        return {"operatorType": f"{kind}@neo4j", "args": {"Details": details}, "children": list(children)}

    procs = Neo4jStore.read_procedures
    builtins = frozenset({"date.truncate", "date", "count", "size"})
    known = builtins | {"apoc.cypher.runfirstcolumnsingle", "apoc.cypher.run", "apoc.text.join", "apoc.x.y"}
    ok = op("ProduceResults", "d", op("Projection", "date.truncate($autostring_0, date()) AS d"))
    plan.check_neo4j("r", ok, gate.Level.READ, builtins, known, procedures=procs)
    cases = [
        ("r", op("ProduceResults", "l", op("LoadCSV", "l"))),
        ("r", op("ProduceResults", "x", op("Projection", "apoc.cypher.runFirstColumnSingle($s, {}) AS x"))),
        ("r", op("ProduceResults", "x", op("Projection", "`apoc`.cypher.run($s) AS x"))),
        ("r", op("ProduceResults", "m", op("Projection", "{a: size(apoc.text.join($l, $s))} AS m"))),
        ("r", op("ProduceResults", "name", op("ProcedureCall", "dbms.listConfig() :: (name :: STRING)"))),
        ("r", op("ProduceResults", "v", op("ProcedureCall", "db.labels(apoc.x.y()) :: (v :: STRING)"))),
        ("r", op("ProduceResults", "n", op("ShowSettings", "allSettings"))),
        ("rw", op("ProduceResults", "", op("Create", "(anon_0)"))),
        ("s", op("ProduceResults", "", op("ProcedureCall", "apoc.log.stream($s) :: (line :: STRING)"))),
        ("r", None),
    ]
    for qtype, tree in cases:
        with pytest.raises(gate.GateError):
            plan.check_neo4j(qtype, tree, gate.Level.READ, builtins, known, procedures=procs)
    with pytest.raises(gate.GateError, match="TransactionForeach"):
        plan.check_neo4j(
            "w",
            op("ProduceResults", "", op("TransactionForeach", "")),
            gate.Level.WRITE,
            builtins,
            known,
            procedures=procs,
        )
    plan.check_neo4j(
        "rw",
        op("ProduceResults", "", op("Create", "(anon_0)")),
        gate.Level.WRITE,
        builtins,
        known,
        procedures=procs,
    )
    # planner syntax that reads like a call passes; a dotted unknown name never does
    plan.check_neo4j(
        "r",
        op("Filter", "CoerceToPredicate(reduce(a = 0, x IN $l | a + x))"),
        gate.Level.READ,
        builtins,
        known,
        procedures=procs,
    )
    with pytest.raises(gate.GateError, match=r"nope\.fn"):
        plan.check_neo4j("r", op("Filter", "nope.fn($x)"), gate.Level.READ, builtins, known, procedures=procs)


# --- a query worker that dies -----------------------------------------------------------


def test_a_dead_worker_is_one_line() -> None:
    limits = QueryLimits()
    assert "SIGSEGV" in str(_death(-11, b"", limits))
    assert "memory" in str(_death(1, b"Traceback ...\nMemoryError\n", limits))
    assert "\n" not in str(_death(1, b"boom\nsecond line\n", limits))
