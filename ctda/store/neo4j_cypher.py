"""The Cypher a Neo4j store sends, and the driver's values made plain: DDL from the schema,
columnar ``UNWIND`` batches, the batched deletes and the relabelling of the flip and of a
removal, row
conversion (kept apart from the store's flows in :mod:`ctda.store.neo4j_store`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ctda.store import schema

if TYPE_CHECKING:
    import pyarrow as pa


def schema_statements() -> list[str]:
    """Constraints and indexes, from :mod:`ctda.store.schema`: a uniqueness constraint on
    each node label's key (Ladybug's primary key) and an index on its ``indexed`` properties
    (``run_id``, ``job_id``: what the flip and deletes find a run's nodes by); the same for
    the staging label of each label a run or job owns."""
    out = []
    staged = [(schema.staged(x.name), x) for x in schema.OWNED]
    for name, label in [(x.name, x) for x in schema.NODES] + staged:
        key = label.key
        unique = f"FOR (n:{name}) REQUIRE n.{key} IS UNIQUE"
        out.append(f"CREATE CONSTRAINT {_index_name(name, key)} IF NOT EXISTS {unique}")
        out += [
            f"CREATE INDEX {_index_name(name, p)} IF NOT EXISTS FOR (n:{name}) ON (n.{p})"
            for p in label.indexed
        ]
    return out


def _index_name(label: str, prop: str) -> str:
    """``ctda_<label>_<property without _id>`` (``ctda_event_run``): the names stores have."""
    short = prop[: -len("_id")] if prop.endswith("_id") else prop
    return f"ctda_{label.lower()}_{short}"


def create_nodes(label: schema.Label, const: dict[str, str], name: str | None = None) -> str:
    """Columnar UNWIND creating ``label`` nodes labelled ``name`` (by default the label's
    own; a staging label for a run being written); ``const`` maps properties to scalar
    params."""
    props = [f"{p}: ${const[p]}" if p in const else f"{p}: $p{k}[i]" for k, p in enumerate(label.columns)]
    return (
        f"UNWIND range(0, size($p0) - 1) AS i CREATE (n:{name or label.name} {{{', '.join(props)}}}) "
        "RETURN collect(id(n)) AS ids"
    )


def create_rels(label: schema.Label) -> str:
    """Columnar UNWIND creating ``label`` relationships between nodes given by internal id."""
    props = ", ".join(f"{p}: $p{k}[i]" for k, p in enumerate(label.columns))
    return (
        "UNWIND range(0, size($src) - 1) AS i "
        "MATCH (a) WHERE id(a) = $src[i] MATCH (b) WHERE id(b) = $dst[i] "
        f"CREATE (a)-[:{label.name}{f' {{{props}}}' if props else ''}]->(b)"
    )


def param_lists(
    table: pa.Table, columns: list[str], lo: int, hi: int, skip: tuple[str, ...] = ()
) -> dict[str, list[Any]]:
    """Parameter lists ``p0..pk`` of rows [lo, hi); numpy's tolist is the fast path."""
    import pyarrow as pa  # a write's: the store's reads need no Arrow

    out: dict[str, list[Any]] = {}
    for k, c in enumerate(columns):
        if c in skip:
            continue
        col = table.column(c).slice(lo, hi - lo)
        if col.null_count == 0 and (pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
            out[f"p{k}"] = col.to_numpy().tolist()
        else:
            out[f"p{k}"] = col.to_pylist()
    return out


def plain(value: Any) -> Any:
    """Driver values as plain Python: nodes and relationships become property dicts."""
    import neo4j.graph
    import neo4j.time

    if isinstance(value, neo4j.graph.Node):
        return {"_labels": sorted(value.labels), **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Relationship):
        return {"_type": value.type, **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Path):
        return [plain(n) for n in value.nodes]
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (neo4j.time.DateTime, neo4j.time.Date, neo4j.time.Time, neo4j.time.Duration)):
        return value.iso_format()
    return value


def records(tx: Any, text: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Rows of one statement in a transaction, as dicts (``Record.data``, but a byte string
    is taken as it is: the driver's export walks one as a sequence, a Python call per byte,
    which took 20 s of the 15 MB analysis snapshot of a 1M-event run)."""
    return [_row(r) for r in tx.run(text, params or {})]


def _row(record: Any) -> dict[str, Any]:
    if not any(isinstance(v, (bytes, bytearray)) for v in record.values()):
        return record.data()  # type: ignore[no-any-return]
    return {k: v if isinstance(v, (bytes, bytearray)) else record.data(k)[k] for k, v in record.items()}


def first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]


def error_code(exc: BaseException) -> str:
    """A server error's Neo4j status code ("" for anything else)."""
    return str(getattr(exc, "code", "") or "")


def out_of_memory(code: str) -> bool:
    """Whether status ``code`` says the server stopped the work for memory (its
    transaction memory pool, or the JVM's): the same work tried again needs as much."""
    return "OutOfMemory" in code


def error_line(code: str, message: str) -> str:
    """The one line for a server error (``code``: Neo4j's status code). Running out of the
    transaction memory says what to change (a flip publishes a large run in bounded
    transactions, :mod:`ctda.store.neo4j_staging`, but a server with less than the
    docker-compose defaults, heap 2g and 1500m a transaction, may still refuse one)."""
    if out_of_memory(code):
        return (
            "Neo4j: the work needed more memory than the server lets transactions use "
            f"({message.rstrip('.')}); for a run this large raise the server's heap and "
            "db.memory.transaction.max (NEO4J_HEAP and NEO4J_TX_MEMORY with docker compose), "
            "or keep it in the embedded store"
        )
    return f"Neo4j: {message}"


def delete_steps(at: Callable[[str], str]) -> tuple[str, ...]:
    """What a run still owns after the parallel delete pass, removed a batch at a time;
    ``at`` maps a label to the one its nodes carry (visible or staged)."""
    batch = "MATCH (x:{}) WHERE x.run_id = $rid WITH x LIMIT {} DETACH DELETE x RETURN count(*) AS n"
    return (
        f"MATCH (g:{at('Segment')})-[c:CP]->() WHERE g.run_id = $rid WITH c LIMIT $n DELETE c "
        "RETURN count(*) AS n",
        *(batch.format(at(name), "$n") for name in ("Segment", "Event", "Window", "Scenario")),
        batch.format(at("Blob"), 4),
        *(batch.format(at(label.name), "$n") for label in schema.BREAKDOWN_LABELS.values()),
    )


def publish_steps(hide: bool = False, labels: Collection[str] | None = None) -> list[tuple[str, str]]:
    """(owner key, statement) pairs giving a batch of a flipped run's (``run_id``) or job's
    (``job_id``) staged nodes their labels; with ``hide`` the reverse, a removed run's or
    job's visible nodes their staging labels. Each returns how many it relabelled.
    ``labels``: only the nodes of these labels (by default every label a run owns)."""
    out = []
    for label in schema.OWNED:
        if labels is not None and label.name not in labels:
            continue
        key = {"Run": "id", "Job": "id"}.get(label.name) or (
            "job_id" if "job_id" in label.columns else "run_id"
        )
        owner = "job" if label.name == "Job" or key == "job_id" else "run"
        old, new = schema.staged(label.name), label.name
        if hide:
            old, new = new, old
        out.append(
            (
                owner,
                f"MATCH (n:{old}) WHERE n.{key} IN $ids WITH n LIMIT $n "
                f"SET n:{new} REMOVE n:{old} RETURN count(*) AS n",
            )
        )
    return out
