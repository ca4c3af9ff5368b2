"""Store errors, and fault injection for the store's atomicity and kill tests.

A writer ticks a :class:`FaultCounter` after each committed batch; the tests make it fail
or stall at a chosen batch, then check that no partial run is ever visible.
"""

from __future__ import annotations

import os
import sys
import time

from ctda.errors import CtdaError

#: test hook: raise :class:`InjectedFault` after this many write batches
FAIL_AFTER_ENV = "CTDA_STORE_FAIL_AFTER_BATCHES"
#: test hook: stop (sleep) after this many write batches, so a test can kill the writer
STALL_AFTER_ENV = "CTDA_STORE_STALL_AFTER_BATCHES"
STALL_MARK = "ctda-store: stalled"
#: test hook: stall (as above) after this many steps of removing runs, so a test can read the
#: store while a removal is half done
STALL_REMOVAL_ENV = "CTDA_STORE_STALL_REMOVAL_AFTER_STEPS"


class StoreError(CtdaError):
    """A store problem worth one line to the user (no credentials in the message)."""


class InjectedFault(StoreError):
    """Raised on purpose by the fault-injection hook to test atomicity."""


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else None


class FaultCounter:
    """Counts committed write batches for the atomicity tests' hooks.

    ``fail_after`` (or $CTDA_STORE_FAIL_AFTER_BATCHES) raises :class:`InjectedFault` once
    that many batches are done; $CTDA_STORE_STALL_AFTER_BATCHES prints ``STALL_MARK`` to
    stderr and sleeps for good instead, for tests that kill the writing process.
    """

    def __init__(self, fail_after: int | None, stall_env: str = STALL_AFTER_ENV) -> None:
        self.fail_after = fail_after if fail_after is not None else _env_int(FAIL_AFTER_ENV)
        self.stall_after = _env_int(stall_env)
        self.done = 0

    @classmethod
    def removal(cls) -> FaultCounter:
        """The counter of a removal's committed steps: it only stalls
        ($CTDA_STORE_STALL_REMOVAL_AFTER_STEPS), never fails."""
        counter = cls(None, STALL_REMOVAL_ENV)
        counter.fail_after = None
        return counter

    def tick(self) -> None:
        self.done += 1
        if self.fail_after is not None and self.done >= self.fail_after:
            raise InjectedFault(f"injected fault after {self.done} write batch(es) ({FAIL_AFTER_ENV})")
        if self.stall_after is not None and self.done >= self.stall_after:
            print(STALL_MARK, file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)


__all__ = [
    "FAIL_AFTER_ENV",
    "STALL_AFTER_ENV",
    "STALL_MARK",
    "STALL_REMOVAL_ENV",
    "FaultCounter",
    "InjectedFault",
    "StoreError",
]
