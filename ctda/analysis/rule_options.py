"""The rules' tunables, apart from the rules: :mod:`ctda.options` validates them, and
importing the rules package declares every rule (numpy, pandas, numba), which the command
line's start-up and help must not pay for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RuleOptions:
    """Tunables of the timestamp-based rules (ns)."""

    gil_min_gap_ns: int = 20_000  # shorter pauses are the interpreter's own overhead
    gil_max_lag_ns: int = 200_000  # a woken thread resumes within this of the release
    lock_lookback: int = 8  # runtime calls examined backwards for lock holders
    stream_wait_min_gap_ns: int = 20_000  # GPU work this late on an idle stream was held back
    stream_wait_max_lag_ns: int = 50_000  # a cross-stream wait resolves within this
    stream_wait_lookback: int = 8  # ends examined backwards for one on another stream
    cpus: int = 0  # the host's cores when the user knows them (0: unknown), for CPU contention
