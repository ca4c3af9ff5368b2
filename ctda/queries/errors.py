"""The error every query module raises for the user's input."""

from __future__ import annotations

from ctda.errors import CtdaError


class QueryError(CtdaError, ValueError):
    """A bad query name, parameter or value, or a refused query (one line for the user)."""
