"""Named Cypher queries over the store, one ``.cypher`` file each (see :mod:`.loader`)."""

from __future__ import annotations

from ctda.queries.loader import NamedQuery, QueryError, get, is_write, load_all

__all__ = ["NamedQuery", "QueryError", "get", "is_write", "load_all"]
