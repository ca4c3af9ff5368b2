"""Named Cypher queries over the store, one ``.cypher`` file each (see :mod:`.loader`).

The names below are bound on first use: the query worker (:mod:`.worker`) lives in this
package and is imported before anything else when ``ctda query`` starts, so the package
itself loads nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctda import lazy

if TYPE_CHECKING:
    from ctda.queries.loader import NamedQuery, QueryError, get, is_write, load_all

__all__ = ["NamedQuery", "QueryError", "get", "is_write", "load_all"]

_lookup = lazy.exports(globals(), dict.fromkeys(__all__, "ctda.queries.loader"))


def __getattr__(name: str) -> Any:
    return _lookup(name)
