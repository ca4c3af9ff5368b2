"""The named queries shipped with ctda that only read, by their text.

A shipped query's text is fixed and its parameters are bound, never spliced in, so each
passes or fails the query gates the same way every time: ``tests/test_named_plans.py``
passes every one through the tokenizer's gate and both stores' plan gates, and
:func:`ctda.queries.gate.check` and :meth:`ctda.store.base.Store.query` do not check it
again on every run (the tokenizer and an ``EXPLAIN``: tens of ms of ``ctda query``'s
start-up, and of every report's and page's queries). Read here from the package's files alone (not through
:mod:`ctda.queries.loader`, which the store's modules must not import).
"""

from __future__ import annotations

from importlib import resources

#: the line that declares a named query a writer (in any of its dialect variants)
WRITE_MARK = "// @write"

_READERS: frozenset[str] | None = None


def shipped_reader(text: str) -> bool:
    """Whether ``text`` is, word for word, a dialect variant of a shipped named query none
    of whose variants writes."""
    global _READERS
    if _READERS is None:
        by_name: dict[str, list[str]] = {}
        for f in resources.files("ctda.queries").iterdir():
            if f.name.endswith(".cypher"):
                by_name.setdefault(f.name.partition(".")[0], []).append(f.read_text(encoding="utf-8"))
        _READERS = frozenset(
            t
            for texts in by_name.values()
            if not any(line.strip() == WRITE_MARK for t in texts for line in t.splitlines())
            for t in texts
        )
    return text in _READERS
