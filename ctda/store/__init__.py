"""Graph stores for analysed runs: Neo4j (team server) and LadybugDB (embedded default).

    with open_store("bolt://host:7687") as store:   # or a path, or None for the default
        store.runs()

See :mod:`ctda.store.schema` for the data model, :mod:`ctda.store.contract` for what a
backend declares and implements, :mod:`ctda.store.base` for what every backend shares and
:mod:`ctda.store.backends` for how ``--db`` picks one (built-ins, and the ``ctda.stores``
entry point group).
"""

from __future__ import annotations

from ctda.store import backends
from ctda.store.base import QueryResult, RunInfo, Store, StoreError
from ctda.store.config import Target, resolve
from ctda.store.faults import InjectedFault

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
    backend = backends.by_kind(target.kind)
    try:
        return backend.from_target(target, read_only=read_only)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise StoreError(
            f"the {backend.kind} store needs its driver (pip install 'ctda[{backend.extra}]'): {exc}"
        ) from None
