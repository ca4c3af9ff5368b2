"""Why an edge exists: each dependency rule's name and its docstring.

The docstrings are the source of truth (every rule documents the trace fields it reads and
why the dependency is real), so the UI reads them from the rule registry rather than
keeping a second copy of the prose.
"""

from __future__ import annotations

from ctda.api import edge_type_name, rule_docs

__all__ = ["etype_name", "rule_doc", "rule_docs", "summary"]


def rule_doc(name: str) -> str:
    """The docstring of rule ``name``, or a note that it has none."""
    return rule_docs().get(name, "") or f"(no documentation for rule {name!r})"


def summary(name: str) -> str:
    """First paragraph of the rule's docstring, on one line (for tables)."""
    first = rule_doc(name).split("\n\n", 1)[0]
    return " ".join(first.split())


def etype_name(code: int) -> str:
    """Readable edge type (``launch``, ``cross_thread``, ...)."""
    return edge_type_name(code)
