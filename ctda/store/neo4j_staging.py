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

Neo4j holds every node a transaction relabels in that transaction's memory (about 2.3 kB a
node, measured on 5.26 with the two indexed labels of an event), so a flip or a hide of
more than :data:`ATOMIC_NODES` nodes would outgrow what servers let one transaction use (a
run of 1M trace events needed more than the 1.4 GiB of the docker-compose defaults). Such a
run's nodes are published before the flip, in transactions of their own, and the flip
gives the Run (and Job) nodes alone their labels; a large run being removed has its Run
node hidden and the rest deleted as it is. For those seconds a raw query can see the
events of a run it cannot find the Run of; what ctda reads starts from complete runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
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
#: the most nodes a run (or job) may own for its flip, or its hiding, to relabel them all in
#: one transaction (about 450 MiB of transaction memory); above, see the module's doc
ATOMIC_NODES = 200_000
#: what the flip of a large run still relabels: the nodes through which ctda finds a run
HEADS = ("Run", "Job")
#: the labels counted for :data:`ATOMIC_NODES` (what a large run owns is nearly all these)
BULK = ("Event", "Segment")


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
    _beat: Callable[[list[int], list[int]], None]

    def _prepublish(self, run_ids: list[int], job_ids: list[int]) -> None:
        # before the flip, each batch its own transaction: only for runs too large for one
        if _owned(self._read, run_ids, staged=True) <= ATOMIC_NODES:
            return
        beat = Heartbeat(self, run_ids, job_ids)  # still alive: not for gc
        ids = {"run": run_ids or [-1], "job": job_ids or [-1]}
        for owner, q in publish_steps(labels=[x.name for x in schema.OWNED if x.name not in HEADS]):
            while int(self._write(q, {"ids": ids[owner], "n": PUBLISH_BATCH})[0]["n"]):
                beat.maybe()

    def _publish(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        # inside the flip's transaction: all of it becomes visible at its commit, or none
        # (a large run's other nodes were published before, by _prepublish)
        self._relabel(run, run_ids, job_ids, hide=False)

    def _hide(self, run: Run, run_ids: list[int], job_ids: list[int]) -> None:
        # inside the transaction marking them deleting: at its commit every node they own
        # goes back under its staging label, so the many transactions of the removal that
        # follows are never seen (a large run: its Run node only); a job that keeps a
        # hidden run loses its link to it
        run(
            "MATCH (j:Job)-[h:HAS_RANK]->(r:Run) WHERE r.id IN $r AND NOT j.id IN $j DELETE h",
            {"r": run_ids or [-1], "j": job_ids or [-1]},
        )
        large = _owned(run, run_ids, staged=False) > ATOMIC_NODES
        self._relabel(run, run_ids, job_ids, hide=True, labels=HEADS if large else None)

    @staticmethod
    def _relabel(
        run: Run, run_ids: list[int], job_ids: list[int], *, hide: bool, labels: Collection[str] | None = None
    ) -> None:
        ids = {"run": run_ids or [-1], "job": job_ids or [-1]}
        for owner, q in publish_steps(hide, labels):
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


def _owned(run: Run, run_ids: list[int], *, staged: bool) -> int:
    """How many nodes of :data:`BULK` labels runs ``run_ids`` own, under their staging
    labels or their visible ones (index counts)."""
    total = 0
    for name in BULK:
        label = schema.staged(name) if staged else name
        q = f"MATCH (n:{label}) WHERE n.run_id IN $ids RETURN count(n) AS n"
        total += int(run(q, {"ids": run_ids or [-1]})[0]["n"])
    return total


class Heartbeat:
    """Refreshes the heartbeat of pending runs (and jobs) so other writers do not take them
    for dead: at most every :data:`HEARTBEAT_S` however often :meth:`maybe` is called."""

    def __init__(self, store: Staging, run_ids: list[int], job_ids: list[int] | None = None) -> None:
        self.store, self.run_ids, self.job_ids = store, run_ids, job_ids or []
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def maybe(self) -> None:
        now = time.monotonic()
        if now - self.last < HEARTBEAT_S:
            return
        with self.lock:
            self.last = now
            self.store._beat(self.run_ids, self.job_ids)
