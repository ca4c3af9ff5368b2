"""A Neo4j run under staging labels (:attr:`ctda.store.contract.Engine.stages_labels`).

A run of millions of rows cannot be one Neo4j transaction, so its nodes are written in
many, each under the staging label of its label (``PendingEvent``,
:func:`ctda.store.schema.staged`), which no user's query may read (the query gate refuses
plans naming one, and plans reading nodes or relationships without a label). A
heartbeat keeps the pending run from looking abandoned; the flip's one transaction gives
every node its visible label, in batches. Removal runs the other way: one transaction
marks a run ``deleting`` and gives its nodes back their staging labels (a replaced run's
in the flip of the run replacing it), then batches delete them; it looks under both
labels, for a store whose removal was cut short before runs were hidden so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctda.store import schema
from ctda.store.contract import Run
from ctda.store.faults import FaultCounter
from ctda.store.neo4j_cypher import delete_steps, publish_steps

if TYPE_CHECKING:
    import pyarrow as pa

HEARTBEAT_S = 5.0
DELETE_BATCH = 5000
#: nodes the flip relabels per statement (all statements in its one transaction)
PUBLISH_BATCH = 20000


class Staging:
    """The staging half of :class:`ctda.store.neo4j_store.Neo4jStore` (a mixin: the store
    provides the primitives declared here)."""

    _read: Callable[..., list[dict[str, Any]]]
    _write: Callable[..., list[dict[str, Any]]]
    _at: Callable[[str], str]
    _both: Callable[[str], list[str]]
    _add_nodes: Callable[..., None]
    _add_rels: Callable[..., None]
    _delete_parallel: Callable[[int, FaultCounter], None]

    def _publish(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        # inside the flip's transaction: all of it becomes visible at its commit, or none
        self._relabel(run, run_ids, job_ids, hide=False)

    def _hide(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        # inside the transaction marking them deleting: at its commit every node they own
        # goes back under its staging label, so the many transactions of the removal that
        # follows are never seen; a job that keeps a hidden run loses its link to it
        run(
            "MATCH (j:Job)-[h:HAS_RANK]->(r:Run) WHERE r.id IN $r AND NOT j.id IN $j DELETE h",
            {"r": run_ids or [-1], "j": job_ids or [-1]},
        )
        self._relabel(run, run_ids, job_ids, hide=True)

    @staticmethod
    def _relabel(run: Run, run_ids: list[int], job_ids: list[int], *, hide: bool) -> None:
        ids = {"run": run_ids or [-1], "job": job_ids or [-1]}
        for owner, q in publish_steps(hide):
            while int(run(q, {"ids": ids[owner], "n": PUBLISH_BATCH})[0]["n"]):
                pass

    def _add_owned(self, label: schema.Label, rows: pa.Table) -> None:
        # a run's or job's rows stay under the staging labels until the flip publishes them
        (self._add_nodes if label.ends is None else self._add_rels)(label, rows, staged=True)

    def _delete_ids(self, ids: list[int]) -> None:
        # many transactions: the runs are hidden already (_hide), or were never published
        faults = FaultCounter.removal()
        for rid in ids:
            self._delete_parallel(rid, faults)
            # whatever the parallel pass missed (an unknown event count): one batch at a time;
            # a run of an older release marked deleting may still carry its visible labels
            for q in delete_steps(str) + delete_steps(self._at):
                self._until_empty(q, {"rid": rid, "n": DELETE_BATCH}, faults)
            for lab in self._both("Run"):
                self._write(f"MATCH (r:{lab} {{id: $rid}}) DETACH DELETE r", {"rid": rid})

    def _until_empty(self, query: str, params: dict[str, Any], faults: FaultCounter | None = None) -> None:
        """Run a batched delete (it returns how many it removed) until it removes nothing."""
        while self._write(query, params)[0]["n"]:
            if faults is not None:
                faults.tick()


class Heartbeat:
    """Refreshes a pending run's heartbeat so other writers do not take it for dead."""

    def __init__(self, store: Staging, rid: int) -> None:
        self.store, self.rid = store, rid
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def maybe(self) -> None:
        now = time.monotonic()
        if now - self.last < HEARTBEAT_S:
            return
        with self.lock:
            self.last = now
            self.store._write(
                f"MATCH (r:{self.store._at('Run')} {{id: $rid}}) SET r.heartbeat = $t",
                {"rid": self.rid, "t": int(time.time())},
            )
