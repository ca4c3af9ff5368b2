"""Named Cypher queries: find, parse, pick the dialect variant, type the parameters.

Every ``<name>.cypher`` file in this package is a named query. Its leading ``//`` comment
lines describe it; ``// @param NAME TYPE [= DEFAULT]  text`` lines declare parameters
(TYPE is ``string``, ``int``, ``float`` or ``bool``; no default means required).

Where Neo4j and Ladybug disagree, a query ships as ``<name>.neo4j.cypher`` and
``<name>.ladybug.cypher`` instead (the part before ``.cypher`` is a store backend's
``dialect``: :func:`dialects`), each tested against its store. The differences found
so far, kept here so every query author sees them in one place:

- list indexing is 0-based in Neo4j and 1-based in Ladybug (``[1,2,3][1]``): avoid it;
- ``ORDER BY`` after ``UNION ALL`` sorts the whole result in Neo4j only inside
  ``CALL {}``, which Ladybug lacks; Ladybug sorts the last part only: sort per part;
- a ``WITH ... ORDER BY`` in Ladybug needs a ``SKIP`` or ``LIMIT``: sort in ``RETURN``;
- a null parameter binds as BOOL in Ladybug (``$x IS NULL OR n.p = $x`` fails to type):
  use sentinels (``step = -1`` means every window);
- ``sum()`` of integers is INT128 in Ladybug (Decimal in Python; the store converts it),
  and ``sum()`` over no rows or only nulls is null in Ladybug, 0 in Neo4j: wrap in
  ``coalesce``;
- ``type(r)`` does not exist in Ladybug (``label(r)``), ``head()``, ``toString()``,
  ``toInteger()`` and map projections ``n {.a}`` neither: the schema stores what the
  queries need as properties instead (``DEP.type``, ``Event.display_name``, ...);
- Ladybug 0.22 returns one row, not all, for an ``OPTIONAL MATCH`` whose pattern joins
  two already-bound nodes through a new one (``(s)-[]->(x)-[]->(e)`` with s and e
  bound): anchor such patterns at one bound node and filter the other by property;
- ``options``, ``order`` and ``end`` are reserved words in Ladybug: no such property names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ctda.queries import gate
from ctda.queries.errors import QueryError
from ctda.queries.shipped import WRITE_MARK

_PARAM = re.compile(r"^//\s*@param\s+(\w+)\s+(\w+)(?:\s*=\s*(\S+))?\s*(.*)$")
_TYPES = ("string", "int", "float", "bool")


@dataclass(frozen=True)
class Param:
    """One declared parameter of a named query."""

    name: str
    type: str
    default: Any = None
    required: bool = True
    doc: str = ""


@dataclass
class NamedQuery:
    """A named query: its description, parameters and per-dialect text."""

    name: str
    description: str
    params: list[Param] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # dialect ("" = shared) -> text
    writes: bool = False  # declared with a ``// @write`` line: needs ``ctda query --write``

    def has(self, dialect: str) -> bool:
        """Whether the query runs on stores of ``dialect`` (some need Neo4j's procedures)."""
        return dialect in self.texts or "" in self.texts

    def text(self, dialect: str) -> str:
        if dialect in self.texts:
            return self.texts[dialect]
        if "" in self.texts:
            return self.texts[""]
        raise QueryError(f"query {self.name!r} has no variant for {dialect}")

    def bind(self, raw: dict[str, str]) -> dict[str, Any]:
        """Typed parameters from ``--param k=v`` strings, defaults filled in."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            takes = ", ".join(known) or "none"
            raise QueryError(f"query {self.name!r} has no parameter {', '.join(unknown)}; it takes {takes}")
        out: dict[str, Any] = {}
        for p in self.params:
            if p.name in raw:
                out[p.name] = coerce(raw[p.name], p.type, p.name)
            elif p.required:
                raise QueryError(
                    f"query {self.name!r} needs --param {p.name}=... ({p.type}) {p.doc}".rstrip()
                )
            else:
                out[p.name] = p.default
        return out


def coerce(value: str, kind: str, name: str = "value") -> Any:
    """A ``--param`` string as the declared type."""
    try:
        if kind == "int":
            return int(value, 0)
        if kind == "float":
            return float(value)
        if kind == "bool":
            low = value.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return low in ("true", "1", "yes")
    except ValueError:
        raise QueryError(f"parameter {name} must be {kind}, not {value!r}") from None
    return value


def guess(value: str) -> Any:
    """Type of an ad-hoc query's ``--param`` value: JSON literal if it parses, else string."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, (int, float, bool, list)) or parsed is None else value


def _parse(name: str, text: str) -> tuple[str, list[Param]]:
    desc: list[str] = []
    params: list[Param] = []
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("//"):
            if s:
                break
            continue
        if s == WRITE_MARK:
            continue
        m = _PARAM.match(s)
        if m:
            pname, ptype, default, doc = m.groups()
            if ptype not in _TYPES:
                raise QueryError(f"{name}.cypher: parameter {pname} has unknown type {ptype}")
            value = coerce(default, ptype, pname) if default is not None else None
            params.append(Param(pname, ptype, value, default is None, doc.strip()))
        else:
            desc.append(s[2:].strip())
    return " ".join(d for d in desc if d), params


def dialects() -> tuple[str, ...]:
    """The Cypher dialects a query may ship a variant for: the store backends' own
    (:mod:`ctda.store.backends`, ``dialect``)."""
    from ctda.store import backends

    return backends.dialects()


def load_all() -> dict[str, NamedQuery]:
    """Every named query shipped in this package, by name."""
    from ctda.store import backends

    out: dict[str, NamedQuery] = {}
    builtin = backends.dialects(builtin=True)
    files = sorted(
        (f for f in resources.files("ctda.queries").iterdir() if f.name.endswith(".cypher")),
        key=lambda f: f.name,
    )
    for f in files:
        stem = f.name[: -len(".cypher")]
        name, _, dialect = stem.partition(".")
        # the plugins' dialects are read (their entry points: ~20 ms) only for a variant
        # no built-in backend speaks
        if dialect and dialect not in builtin and dialect not in dialects():
            raise QueryError(f"{f.name}: unknown dialect {dialect!r}")
        text = f.read_text(encoding="utf-8")
        desc, params = _parse(name, text)
        q = out.setdefault(name, NamedQuery(name, desc, params))
        if not q.description:
            q.description = desc
        if params and not q.params:
            q.params = params
        q.texts[dialect] = text
        q.writes = q.writes or any(line.strip() == WRITE_MARK for line in text.splitlines())
    return out


def get(name: str) -> NamedQuery:
    queries = load_all()
    if name not in queries:
        raise QueryError(f"no named query {name!r}; known: {', '.join(sorted(queries))}")
    return queries[name]


def is_write(text: str, engine: gate.Engine | None = None) -> bool:
    """Whether the read gate refuses ``text`` on the store backend ``engine`` (see
    :mod:`ctda.queries.gate`; None: a query that calls no procedure)."""
    try:
        gate.check(text, engine, gate.Level.READ)
    except QueryError:
        return True
    return False


def looks_named(text: str) -> bool:
    """A bare identifier is a query name; anything else is Cypher text."""
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text.strip()) is not None


def prepare(
    query: str, params: Mapping[str, Any] | None, dialect: str, *, run: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The text to send and its parameters, for a named query or Cypher text.

    A named query gets its ``dialect`` variant and its declared parameters, typed (values
    may be ``--param`` strings or Python values) with defaults filled in. Cypher text gets
    its string values parsed as JSON literals where they are (``5``, ``true``). ``run``
    binds ``$run`` unless ``params`` does: on every Cypher text, on a named query that
    declares it.
    """
    given = dict(params or {})
    if looks_named(query):
        q = get(query)
        # None stands for the declared default
        raw = {k: v if isinstance(v, str) else str(v) for k, v in given.items() if v is not None}
        if run is not None and any(p.name == "run" for p in q.params):
            raw = {"run": run, **raw}
        return q.text(dialect), q.bind(raw)
    values = {k: guess(v) if isinstance(v, str) else v for k, v in given.items()}
    return query, ({"run": run, **values} if run is not None else values)


def run(store: Any, name: str, **params: Any) -> Any:
    """Run named query ``name`` on ``store`` with ``params`` (defaults filled in)."""
    if not looks_named(name):
        raise QueryError(f"no named query {name!r}")
    text, bound = prepare(name, params, store.dialect)
    return store.query(text, bound)
