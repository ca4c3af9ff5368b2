"""The store backends, by name: the one place ``--db`` is matched to an engine.

A backend is a :class:`~ctda.store.base.Store` subclass that declares its ``kind`` (its
name here), the URL ``schemes`` it serves (none: it opens filesystem paths), its Cypher
``dialect`` and the pip ``extra`` of its driver, and is decorated with :func:`register`.
Adding one means writing that class and naming its module in :data:`MODULES`; resolving
``--db``, opening the store and picking named-query variants all follow from it.

Backend modules import their drivers only when a store is opened, so listing the backends
costs no driver import and works whichever extras are installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ctda.store.base import Store

#: modules whose import registers the built-in backends
MODULES = ("ctda.store.ladybug_store", "ctda.store.neo4j_store")

_BACKENDS: dict[str, type[Store]] = {}
S = TypeVar("S", bound="type[Store]")


def register(cls: S) -> S:
    """Class decorator: make a backend known by its ``kind``."""
    if not cls.kind or not cls.dialect:
        raise TypeError(f"{cls.__name__} must declare kind and dialect")
    _BACKENDS[cls.kind] = cls
    return cls


def backends() -> dict[str, type[Store]]:
    """Every registered backend, by kind (the built-in ones first)."""
    for module in MODULES:
        importlib.import_module(module)
    return dict(_BACKENDS)


def by_kind(kind: str) -> type[Store]:
    """The backend called ``kind`` (``Target.kind``)."""
    found = backends().get(kind)
    if found is None:
        raise KeyError(f"no store backend {kind!r}; known: {', '.join(backends())}")
    return found


def for_scheme(scheme: str) -> type[Store] | None:
    """The backend serving URL scheme ``scheme`` (``bolt``, ``neo4j+s``, ...), or None."""
    scheme = scheme.lower()
    return next((b for b in backends().values() if scheme in b.schemes), None)


def for_paths() -> type[Store]:
    """The backend that opens filesystem paths (the embedded default)."""
    return next(b for b in backends().values() if not b.schemes)


def dialects() -> tuple[str, ...]:
    """Every backend's Cypher dialect (named queries may ship a variant for each)."""
    return tuple(dict.fromkeys(b.dialect for b in backends().values()))
