"""What a prediction cannot see, said next to it.

A trace records one process (unless other processes of the host were merged into it,
``ctda merge``). Where a scenario changes work that the trace only shows the traced process
waiting for, the prediction re-times those waits and nothing else: the CPU
time the unrecorded work takes from the traced threads stays in their observed durations
(see the limits of contention-aware re-timing in docs/whatif-accuracy.md). The user gets
one line saying so, instead of a number that looks as trustworthy as the others.

Each check is a function of the scenario returning its line, or None; :data:`CHECKS` is
the registry, :func:`notes` the only entry point.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ctda.whatif.scenario import Scenario
from ctda.whatif.select import name_mask

#: PyTorch's iterator over a DataLoader whose batches come from worker processes
MULTIPROCESS_LOADER = "_MultiProcessingDataLoaderIter"


def loader_workers(sc: Scenario) -> str | None:
    """The scenario changes the waits for batches that DataLoader worker processes make."""
    if not (name_mask(sc.base, re.escape(MULTIPROCESS_LOADER)) & (sc.factors != 1.0)).any():
        return None
    lanes = sc.base.table.lanes
    if lanes.loc[~lanes.is_gpu.astype(bool), "pid"].nunique() > 1:
        return None  # other processes of the host are in the trace (ctda merge): their load is modelled
    return (
        "the batches come from DataLoader worker processes this trace does not record: the "
        "prediction re-times the waits for them, not the CPU time their work takes from the "
        "training threads (profile the workers and add their traces with ctda merge)"
    )


CHECKS: tuple[Callable[[Scenario], str | None], ...] = (loader_workers,)


def notes(sc: Scenario) -> list[str]:
    """One line per part of ``sc`` the trace cannot show (empty: none known)."""
    return [line for check in CHECKS if (line := check(sc)) is not None]
