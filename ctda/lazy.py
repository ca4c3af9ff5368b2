"""Re-exported names bound on first use (a module ``__getattr__``, PEP 562).

A package front (``ctda``, ``ctda.api``, ``ctda.api_jobs``) names what it offers without
importing the modules behind it, so a command that lists runs never loads the engine. Each
front keeps one table, name -> module (or (module, attribute) for a name bound under
another name), and delegates its ``__getattr__`` here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    namespace: dict[str, Any],
    where: Mapping[str, str],
    renamed: Mapping[str, tuple[str, str]] | None = None,
    modules: Mapping[str, str] | None = None,
) -> Callable[[str], Any]:
    """A ``__getattr__`` for the module whose globals are ``namespace``: a name in ``where``
    (or ``renamed``) is imported from its module and cached in ``namespace``; a name in
    ``modules`` is that module itself; anything else is an AttributeError."""

    def lookup(name: str) -> Any:
        if modules and name in modules:
            return importlib.import_module(modules[name])
        module, attr = (renamed or {}).get(name) or (where.get(name), name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), attr)
        namespace[name] = value
        return value

    return lookup
