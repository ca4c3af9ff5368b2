"""Bounds on one user query: how long it may run, how many rows it may return, how much
memory its worker may take.

Every query a user types (``ctda query``, the UI console, the library's
``Session.query``) runs under a :class:`QueryLimits`: the store stops it at the timeout
(Neo4j: the transaction's timeout; the embedded store: its query timeout) and the caller
stops reading at the row cap; the worker process it runs in (:mod:`ctda.queries.worker`)
has an address-space cap and is killed if it outlives the timeout by a grace period.
Each bound that trips is one line for the user (:class:`QueryLimitError`).

Defaults come from the environment, so a shared server can tighten them:
``CTDA_QUERY_TIMEOUT_S`` (60), ``CTDA_QUERY_MAX_ROWS`` (100000) and
``CTDA_QUERY_MEMORY_MB`` (4096).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ctda.queries.errors import QueryError

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_ROWS = 100_000
DEFAULT_MEMORY_MB = 4096
#: how long past its timeout a worker may take to report before it is killed
GRACE_S = 10.0


class QueryLimitError(QueryError):
    """A query stopped by one of its bounds (time, rows, memory) or by a crash of its
    worker (one line for the user)."""


def _env_number(name: str, default: float, low: float, high: float) -> float:
    """``$name`` as a number in [low, high], else ``default`` (a bad value is an error)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise QueryError(f"${name} must be a number, not {raw!r}") from None
    if not low <= value <= high:
        raise QueryError(f"${name} must be between {low:g} and {high:g}, not {raw}")
    return value


@dataclass(frozen=True)
class QueryLimits:
    """The bounds of one query; see the module's docstring."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_rows: int = DEFAULT_MAX_ROWS
    memory_mb: int = DEFAULT_MEMORY_MB

    def __post_init__(self) -> None:
        if not 0 < self.timeout_s <= 86_400:
            raise QueryError(f"a query timeout must be in (0, 86400] seconds, not {self.timeout_s}")
        if not 1 <= self.max_rows <= 100_000_000:
            raise QueryError(f"a row cap must be in [1, 100000000], not {self.max_rows}")
        if not 256 <= self.memory_mb <= 1 << 22:
            raise QueryError(f"a query memory cap must be in [256, 4194304] MiB, not {self.memory_mb}")

    @classmethod
    def from_env(cls) -> QueryLimits:
        """The defaults, each overridden by its environment variable where set."""
        return cls(
            timeout_s=_env_number("CTDA_QUERY_TIMEOUT_S", DEFAULT_TIMEOUT_S, 0.001, 86_400),
            max_rows=int(_env_number("CTDA_QUERY_MAX_ROWS", DEFAULT_MAX_ROWS, 1, 100_000_000)),
            memory_mb=int(_env_number("CTDA_QUERY_MEMORY_MB", DEFAULT_MEMORY_MB, 256, 1 << 22)),
        )

    def too_many_rows(self) -> QueryLimitError:
        return QueryLimitError(
            f"the query returned more than {self.max_rows:,} rows (the row cap): add a LIMIT "
            "or raise CTDA_QUERY_MAX_ROWS"
        )

    def timed_out(self) -> QueryLimitError:
        return QueryLimitError(
            f"the query ran longer than {self.timeout_s:g} s (the query timeout) and was stopped: "
            "narrow it or raise CTDA_QUERY_TIMEOUT_S"
        )

    def out_of_memory(self, where: str = "") -> QueryLimitError:
        return QueryLimitError(
            f"the query needed more memory than it may use{where} (the query memory cap, "
            f"{self.memory_mb:,} MiB in the worker) and was stopped"
        )
