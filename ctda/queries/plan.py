"""The second gate: what the engine itself plans to do with a query, held to allow-lists.

The tokenizer of :mod:`ctda.queries.gate` is a first filter: it reads the text the way
the engines do as far as it can, and refuses what it cannot read surely. This module asks
the engine: the query is planned, not run (``EXPLAIN``), and the plan decides.

Neo4j (:func:`check_neo4j`): the server reports the query's type (``r`` read only,
``rw``/``w`` writes, ``s`` schema or system) and its plan tree. A read query must be of
type ``r``; every operator of its plan must be on :data:`NEO4J_READ_OPERATORS` (no
``LoadCSV``, no ``Show*`` commands, no ``TransactionApply``); every ``ProcedureCall`` must
name a procedure on the gate's read list; and every function the plan's expressions call
must be one of the server's built-ins or on :data:`ctda.queries.gate.PURE_FUNCTIONS`. The
plan spells names as the server resolved them (escapes decoded, backticks off), so none of
the lexer tricks the tokenizer guards against can hide a name here. A write query
(``--write``) may also be of type ``rw``/``w`` (or ``s`` for index and constraint DDL)
and use :data:`NEO4J_WRITE_OPERATORS`; its procedures and functions are held to the same
lists (no ``dbms.*``, ``apoc.periodic.*``, ``apoc.load.*``, ``gds.*``). Anything unknown
is refused.

Neo4j also hides the runs being written (``hidden``: the staging labels their nodes carry
until the flip, :func:`ctda.store.schema.staged`): a plan that names a staging label, or
that reads nodes or relationships whatever their label (:data:`NEO4J_UNANCHORED`: a scan
of all nodes, of a relationship type, a seek by internal id, a count of unlabelled nodes or
relationships) is refused, since it would see them. A query anchored on a label (``MATCH
(e:Event)``, ``MATCH (:Event)-[r:DEP]->()``) reaches only visible runs: a pending run's
nodes hold no visible label and no relationship links them to a visible node.

The embedded store (:func:`check_ladybug`): ``EXPLAIN`` prints its physical plan; each
operator must be on :data:`LADYBUG_READ_OPERATORS` (or, for a write,
:data:`LADYBUG_WRITE_OPERATORS`). Read queries also run on a store opened read-only, so
the engine itself refuses any write.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ctda.queries.gate import PURE_FUNCTIONS, GateError, Level

#: plan operators that only read the graph (Neo4j 5 names, without the ``@neo4j`` suffix)
NEO4J_READ_OPERATORS = frozenset(
    {
        "ProduceResults", "Projection", "Filter", "Argument", "ArgumentTracker", "EmptyResult",
        "AllNodesScan", "NodeByLabelScan", "UnionNodeByLabelsScan", "IntersectionNodeByLabelsScan",
        "SubtractionNodeByLabelsScan", "NodeByIdSeek", "NodeByElementIdSeek", "NodeIndexSeek",
        "NodeUniqueIndexSeek", "MultiNodeIndexSeek", "AssertingMultiNodeIndexSeek",
        "NodeIndexSeekByRange", "NodeUniqueIndexSeekByRange", "NodeIndexScan", "NodeIndexContainsScan",
        "NodeIndexEndsWithScan", "DirectedRelationshipIndexSeek", "UndirectedRelationshipIndexSeek",
        "DirectedRelationshipIndexScan", "UndirectedRelationshipIndexScan",
        "DirectedRelationshipIndexSeekByRange", "UndirectedRelationshipIndexSeekByRange",
        "DirectedRelationshipIndexContainsScan", "UndirectedRelationshipIndexContainsScan",
        "DirectedRelationshipIndexEndsWithScan", "UndirectedRelationshipIndexEndsWithScan",
        "DirectedRelationshipTypeScan", "UndirectedRelationshipTypeScan", "DirectedAllRelationshipsScan",
        "UndirectedAllRelationshipsScan", "DirectedUnionRelationshipTypesScan",
        "UndirectedUnionRelationshipTypesScan", "DirectedRelationshipByIdSeek",
        "UndirectedRelationshipByIdSeek", "DirectedRelationshipByElementIdSeek",
        "UndirectedRelationshipByElementIdSeek", "Expand(All)", "Expand(Into)", "OptionalExpand(All)",
        "OptionalExpand(Into)", "VarLengthExpand(All)", "VarLengthExpand(Into)",
        "VarLengthExpand(Pruning)", "VarLengthExpand(Pruning,BFS)", "BFSPruningVarLengthExpand(All)",
        "BFSPruningVarLengthExpand(Into)", "ShortestPath", "StatefulShortestPath(All)",
        "StatefulShortestPath(Into)", "Repeat(Trail)", "Repeat(Walk)", "NullifyMetadata", "Apply",
        "SemiApply", "AntiSemiApply", "SelectOrSemiApply", "SelectOrAntiSemiApply", "LetSemiApply",
        "LetAntiSemiApply", "LetSelectOrSemiApply", "LetSelectOrAntiSemiApply", "ConditionalApply",
        "AntiConditionalApply", "RollUpApply", "Optional", "Anti", "CartesianProduct", "NodeHashJoin",
        "NodeLeftOuterHashJoin", "NodeRightOuterHashJoin", "ValueHashJoin", "Union", "OrderedUnion",
        "Unwind", "Sort", "PartialSort", "Top", "Top1WithTies", "PartialTop", "Limit", "ExhaustiveLimit",
        "Skip", "Distinct", "OrderedDistinct", "EagerAggregation", "OrderedAggregation",
        "NodeCountFromCountStore", "RelationshipCountFromCountStore", "Eager", "CacheProperties",
        "AssertSameNode", "AssertSameRelationship", "TriadicSelection", "TriadicBuild", "TriadicFilter",
        "ProjectEndpoints", "ProcedureCall",
    }
)  # fmt: skip
#: what ``--write`` adds: data changes and index/constraint DDL (never LoadCSV, never
#: CALL ... IN TRANSACTIONS, never a database or user command)
NEO4J_WRITE_OPERATORS = NEO4J_READ_OPERATORS | frozenset(
    {
        "Create", "Merge", "LockingMerge", "SetProperty", "SetProperties", "SetNodeProperty",
        "SetNodeProperties", "SetNodePropertiesFromMap", "SetRelationshipProperty",
        "SetRelationshipProperties", "SetRelationshipPropertiesFromMap", "SetPropertiesFromMap",
        "SetLabels", "RemoveLabels", "Delete", "DetachDelete", "DeleteNode", "DetachDeleteNode",
        "DeleteRelationship", "DeleteExpression", "DetachDeleteExpression", "DeletePath",
        "DetachDeletePath", "Foreach", "ForeachApply", "SubqueryForeach", "LockNodes",
        "NodeUniqueIndexSeek(Locking)", "NodeIndexSeek(Locking)", "AssertingMultiNodeIndexSeek(Locking)",
        "CreateIndex", "DropIndex", "CreateConstraint", "DropConstraint",
        "DoNothingIfExists(INDEX)", "DoNothingIfExists(CONSTRAINT)",
    }
)  # fmt: skip
#: leaf operators that read nodes or relationships whatever their label: they would see
#: the nodes of runs being written (staged labels), so a user's plan may not hold them
NEO4J_UNANCHORED = frozenset(
    {
        "AllNodesScan", "NodeByIdSeek", "NodeByElementIdSeek", "DirectedRelationshipTypeScan",
        "UndirectedRelationshipTypeScan", "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan",
        "DirectedUnionRelationshipTypesScan", "UndirectedUnionRelationshipTypesScan",
        "DirectedRelationshipByIdSeek", "UndirectedRelationshipByIdSeek",
        "DirectedRelationshipByElementIdSeek", "UndirectedRelationshipByElementIdSeek",
        "DirectedRelationshipIndexSeek", "UndirectedRelationshipIndexSeek", "DirectedRelationshipIndexScan",
        "UndirectedRelationshipIndexScan", "DirectedRelationshipIndexSeekByRange",
        "UndirectedRelationshipIndexSeekByRange", "DirectedRelationshipIndexContainsScan",
        "UndirectedRelationshipIndexContainsScan", "DirectedRelationshipIndexEndsWithScan",
        "UndirectedRelationshipIndexEndsWithScan",
    }
)  # fmt: skip
#: counts read from the count store: allowed only with a node label (``count( (:Event) )``)
_COUNTS = frozenset({"NodeCountFromCountStore", "RelationshipCountFromCountStore"})
_LABELLED_COUNT = re.compile(r"\(\s*:\s*`?[A-Za-z_]")
_ANCHOR = (
    "anchor the query on a node label, e.g. MATCH (e:Event) or MATCH (:Event)-[r:DEP]->(): "
    "a scan of every node or relationship would also see runs still being written"
)

#: query types a level accepts (``s`` only when every operator is index/constraint DDL)
_TYPES = {Level.READ: frozenset({"r"}), Level.WRITE: frozenset({"r", "rw", "w", "s"})}
_DDL = frozenset(
    {"CreateIndex", "DropIndex", "CreateConstraint", "DropConstraint", "DoNothingIfExists(INDEX)",
     "DoNothingIfExists(CONSTRAINT)", "ProduceResults", "EmptyResult"}
)  # fmt: skip

#: expressions that read like calls in a plan but are Cypher syntax, not functions (so
#: ``SHOW FUNCTIONS`` does not list them): list folds and predicates, path finders
_SYNTAX_FORMS = frozenset(
    {"reduce", "any", "all", "none", "single", "exists", "shortestpath", "allshortestpaths"}
)
_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)*`)"
#: a (possibly dotted, possibly quoted) name right before "(": a call in a plan's text. Not
#: after ":", where the plan names an index's label and properties (``r:Run(id)``); a map
#: value is printed after ": " (with a space), so no call can stand there
_CALL = re.compile(rf"(?<![A-Za-z0-9_.$:])({_PART}(?:\.{_PART})*)\(")
_LADYBUG_OP = re.compile(r"│\s*([A-Z][A-Z_]*)\[\d+\]\s*│")

#: physical operators of the embedded store that only read
LADYBUG_READ_OPERATORS = frozenset(
    {
        "RESULT_COLLECTOR", "PROJECTION", "FILTER", "FLATTEN", "SCAN_NODE_TABLE", "SCAN_REL_TABLE",
        "PRIMARY_KEY_SCAN_NODE_TABLE", "QUERY_PRIMARY_KEY_LOOKUP", "INDEX_LOOKUP", "HASH_JOIN_BUILD",
        "HASH_JOIN_PROBE", "INTERSECT_BUILD", "INTERSECT", "CROSS_PRODUCT", "RECURSIVE_EXTEND",
        "PATH_PROPERTY_PROBE", "SEMI_MASKER", "AGGREGATE", "AGGREGATE_FINALIZE", "AGGREGATE_SCAN",
        "ORDER_BY", "ORDER_BY_MERGE", "ORDER_BY_SCAN", "TOP_K", "TOP_K_SCAN", "LIMIT", "SKIP",
        "UNWIND", "UNION_ALL_SCAN", "MULTIPLICITY_REDUCER", "DUMMY_SINK", "DUMMY_SIMPLE_SINK",
        "EMPTY_RESULT", "TABLE_FUNCTION_CALL", "COUNT_REL_TABLE", "COUNT_NODE_TABLE",
    }
)  # fmt: skip
#: what ``--write`` adds on the embedded store (no COPY, LOAD, ATTACH, EXPORT, extensions)
LADYBUG_WRITE_OPERATORS = LADYBUG_READ_OPERATORS | frozenset(
    {"INSERT", "SET_PROPERTY", "DELETE", "MERGE", "CREATE_TABLE", "DROP", "ALTER"}
)


def _refuse(what: str) -> GateError:
    return GateError(f"refused: {what} (the database's plan of the query is held to an allow-list)")


def operators(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every operator of a Neo4j plan tree (the driver's ``summary.plan``), depth first."""
    stack = [plan]
    while stack:
        op = stack.pop()
        yield op
        stack.extend(op.get("children") or [])


def _name(raw: str) -> str:
    """A dotted name as the server resolves it: backticks off, parts joined by dots."""
    parts = re.findall(_PART, raw)
    return ".".join(p[1:-1].replace("``", "`") if p.startswith("`") else p for p in parts)


def check_neo4j(
    query_type: str,
    plan: Mapping[str, Any] | None,
    level: Level,
    builtins: frozenset[str],
    known: frozenset[str],
    *,
    procedures: frozenset[str],
    hidden: frozenset[str] = frozenset(),
) -> None:
    """Raise :class:`GateError` unless Neo4j's plan of a query is allowed at ``level``.

    ``builtins`` are the server's built-in function names and ``known`` all its function
    names, built-in or not, lower case (``SHOW FUNCTIONS``). A name in the plan that reads
    like a call is allowed when it is a built-in or a pure function; an undotted name the
    server has no function of is planner syntax (``reduce(``, ``CoerceToPredicate(``): a
    query cannot call a function the server lacks, planning would have failed. Any other
    name is refused, and so is a procedure not in ``procedures`` (the backend's
    ``read_procedures``).

    ``hidden``: labels no query may read (the staging labels of runs being written); with
    them, plans that read nodes or relationships without a label are refused too.
    """
    if plan is None:
        raise _refuse("the server gave no plan")
    allowed_types = _TYPES.get(level, frozenset())
    if query_type not in allowed_types:
        kinds = {"rw": "reads and writes", "w": "writes", "s": "changes the schema or the system"}
        raise _refuse(f"the server reports that the query {kinds.get(query_type, repr(query_type))}")
    ops = NEO4J_WRITE_OPERATORS if level is Level.WRITE else NEO4J_READ_OPERATORS
    seen: set[str] = set()
    for op in operators(plan):
        kind = str(op.get("operatorType", "")).split("@", 1)[0]
        seen.add(kind)
        if kind not in ops:
            raise _refuse(f"plan operator {kind!r}")
        details = str((op.get("args") or {}).get("Details", ""))
        if hidden:
            _check_anchored(kind, details, hidden)
        if kind == "ProcedureCall":
            m = _CALL.match(details.strip())
            proc = _name(m.group(1)) if m else ""
            if proc.lower() not in procedures:
                raise _refuse(f"procedure {proc or details[:60]!r}")
            details = details.strip()[m.end() :] if m else ""
        for call in _CALL.finditer(details):
            name = _name(call.group(1))
            low = name.lower()
            syntax = low in _SYNTAX_FORMS or ("." not in name and low not in known)
            if low not in builtins and low not in PURE_FUNCTIONS and not syntax:
                raise _refuse(f"function {name[:60]!r}")
    if query_type == "s" and not seen <= _DDL:
        raise _refuse("a schema or system command other than index and constraint DDL")


def _check_anchored(kind: str, details: str, hidden: frozenset[str]) -> None:
    """Refuse an operator that could see a run being written (see the module doc)."""
    if kind in NEO4J_UNANCHORED or (kind in _COUNTS and not _LABELLED_COUNT.search(details)):
        raise GateError(f"refused: plan operator {kind!r}: {_ANCHOR}")
    named = sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", details)) & hidden)
    if named:
        raise GateError(f"refused: label {named[0]!r} holds runs still being written, which no query reads")


def check_ladybug(plan_text: str, level: Level) -> None:
    """Raise :class:`GateError` unless the embedded store's ``EXPLAIN`` output (its physical
    plan, drawn as boxes) holds only operators allowed at ``level``."""
    found = _LADYBUG_OP.findall(plan_text)
    if not found:
        raise _refuse("the store's plan could not be read")
    ops = LADYBUG_WRITE_OPERATORS if level is Level.WRITE else LADYBUG_READ_OPERATORS
    for kind in found:
        if kind not in ops:
            raise _refuse(f"plan operator {kind!r}")
