"""Graph stores for analysed runs: Neo4j (team server) and LadybugDB (embedded default).

    with open_store("bolt://host:7687") as store:   # or a path, or None for the default
        store.runs()

See :mod:`ctda.store.schema` for the data model and :mod:`ctda.store.base` for the
interface both backends implement.
"""

from __future__ import annotations

from ctda.store.base import InjectedFault, QueryResult, RunInfo, Store, StoreError
from ctda.store.config import Target, resolve

__all__ = [
    "InjectedFault",
    "QueryResult",
    "RunInfo",
    "Store",
    "StoreError",
    "Target",
    "open_store",
    "resolve",
]


def open_store(spec: str | Target | None = None, *, read_only: bool = False) -> Store:
    """Open the store named by ``spec`` (``--db`` value), ``$CTDA_DB``, or the default."""
    target = spec if isinstance(spec, Target) else resolve(spec)
    if target.kind == "neo4j":
        try:
            from ctda.store.neo4j_store import Neo4jStore
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreError(
                f"the Neo4j driver is not installed (pip install 'ctda[neo4j]'): {exc}"
            ) from None
        return Neo4jStore(target.location, target.auth, database=target.database, read_only=read_only)
    try:
        from ctda.store.ladybug_store import LadybugStore
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise StoreError(f"the embedded store needs ladybug (pip install 'ctda[embedded]'): {exc}") from None
    return LadybugStore(target.location, read_only=read_only)
