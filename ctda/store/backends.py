"""The store backends, by name: the one place ``--db`` is matched to an engine.

A backend is a :class:`~ctda.store.base.Store` subclass that declares its ``kind`` (its
name here), the URL ``schemes`` it serves (none: it opens filesystem paths), its Cypher
``dialect``, the procedures a read query may call and the pip ``extra`` of its driver
(:class:`~ctda.store.contract.Engine` lists them all), and is decorated with
:func:`register`. The built-in backends are registered by importing :data:`MODULES`; any
installed package adds its own through the entry point group ``ctda.stores`` (an entry
point names a module, imported for its registrations, or a backend class). Resolving
``--db``, opening the store, picking named-query variants and the query gate all follow
from the class.

Backend modules import their drivers only when a store is opened, so listing the backends
costs no driver import and works whichever extras are installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, TypeVar

from ctda.store.faults import StoreError

if TYPE_CHECKING:
    from ctda.store.base import Store

#: modules whose import registers the built-in backends (the embedded default first)
MODULES = ("ctda.store.ladybug_store", "ctda.store.neo4j_store")
#: the entry point group third-party backends are declared in
GROUP = "ctda.stores"

_BACKENDS: dict[str, type[Store]] = {}
_LOADED = False
S = TypeVar("S", bound="type[Store]")


def register(cls: S) -> S:
    """Class decorator: make a backend known by its ``kind``."""
    if not cls.kind or not cls.dialect:
        raise TypeError(f"{cls.__name__} must declare kind and dialect")
    old = _BACKENDS.get(cls.kind)
    if old is not None and old.__qualname__ != cls.__qualname__:
        raise TypeError(f"store backend {cls.kind!r} is declared twice ({_where(old)} and {_where(cls)})")
    _BACKENDS[cls.kind] = cls
    return cls


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _builtins() -> dict[str, type[Store]]:
    """The built-in backends, by kind, in :data:`MODULES` order (no entry point read)."""
    for module in MODULES:
        importlib.import_module(module)
    return {k: b for k, b in _BACKENDS.items() if b.__module__ in MODULES}


def _load() -> None:
    """Import the built-in modules, then every entry point of :data:`GROUP` (once)."""
    global _LOADED
    _builtins()
    if _LOADED:
        return
    _LOADED = True
    # importlib.metadata costs 30 ms to import: read only when a plugin may be asked for
    from importlib.metadata import entry_points

    for ep in entry_points(group=GROUP):
        if ep.value.split(":")[0] in MODULES:
            continue  # a built-in, imported above
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin: one line naming it, not a traceback
            raise StoreError(f"store backend plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from None
        from ctda.store.base import Store

        if isinstance(obj, type) and issubclass(obj, Store) and obj.kind not in _BACKENDS:
            register(obj)


def backends() -> dict[str, type[Store]]:
    """Every registered backend, by kind (the built-in ones first, in :data:`MODULES`
    order, whichever module a caller happened to import first)."""
    _load()
    rank = {module: i for i, module in enumerate(MODULES)}
    order = sorted(_BACKENDS, key=lambda kind: rank.get(_BACKENDS[kind].__module__, len(rank)))
    return {kind: _BACKENDS[kind] for kind in order}


def by_kind(kind: str) -> type[Store]:
    """The backend called ``kind`` (``Target.kind``). A built-in kind is answered without
    reading the plugins (a plugin cannot take a built-in's kind: :func:`register`)."""
    found = _builtins().get(kind) or backends().get(kind)
    if found is None:
        raise KeyError(f"no store backend {kind!r}; known: {', '.join(backends())}")
    return found


def for_scheme(scheme: str) -> type[Store] | None:
    """The backend serving URL scheme ``scheme`` (``bolt``, ``neo4j+s``, ...), or None;
    the built-ins first, then the plugins."""
    scheme = scheme.lower()

    def serving(found: dict[str, type[Store]]) -> type[Store] | None:
        return next((b for b in found.values() if scheme in b.schemes), None)

    # the plugins are read only when no built-in serves the scheme
    return serving(_builtins()) or serving(backends())


def for_paths() -> type[Store]:
    """The backend that opens filesystem paths: the embedded default (built in, so it
    comes before any plugin's)."""
    return next(b for b in _builtins().values() if not b.schemes)


def dialects(builtin: bool = False) -> tuple[str, ...]:
    """Every backend's Cypher dialect (named queries may ship a variant for each); with
    ``builtin``, the built-in backends' only (no entry point read)."""
    found = _builtins() if builtin else backends()
    return tuple(dict.fromkeys(b.dialect for b in found.values()))
