"""Why an edge exists: each dependency rule's name and its docstring.

The docstrings are the source of truth (every rule documents the trace fields it reads and
why the dependency is real), so the UI reads them from the rule functions rather than
keeping a second copy of the prose.
"""

from __future__ import annotations

import inspect
from functools import lru_cache

from ctda.analysis.edges import EdgeType


@lru_cache(maxsize=1)
def rule_docs() -> dict[str, str]:
    """Rule name (as in ``Graph.rule_names``) -> its docstring, for ctda and HTA modes."""
    from ctda.analysis.rules import hta
    from ctda.store.model import rule_docs as ctda_docs

    out = dict(ctda_docs())
    for fn in hta.RULES:
        # HTA rules name their edges "hta_<function>" (see ctda.analysis.rules.hta._batch)
        out.setdefault(f"hta_{fn.__name__}", inspect.cleandoc(fn.__doc__ or ""))
    return out


def rule_doc(name: str) -> str:
    """The docstring of rule ``name``, or a note that it has none."""
    return rule_docs().get(name, "") or f"(no documentation for rule {name!r})"


def summary(name: str) -> str:
    """First paragraph of the rule's docstring, on one line (for tables)."""
    first = rule_doc(name).split("\n\n", 1)[0]
    return " ".join(first.split())


def etype_name(code: int) -> str:
    """Readable edge type (``launch``, ``cross_thread``, ...)."""
    try:
        return EdgeType(int(code)).name.lower()
    except ValueError:
        return str(code)
