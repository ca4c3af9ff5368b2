"""The store's data model, declared once for both backends.

Labels and their properties (types use Ladybug's names). Each backend derives its DDL from
these declarations: Ladybug creates a table per label with the first property as its
primary key; Neo4j, schemaless, gets a uniqueness constraint on that key and an index on
each ``indexed`` property::

    (:Run {id, name, status, file, sha256, ...})         one per ingested trace
      -[:HAS_SCENARIO]->(:Scenario {name: 'baseline'})   the observed replay (later: what-ifs)
        -[:HAS_WINDOW]->(:Window {idx, label, step, ...}) one per analysis window
          -[:HAS_SEGMENT]->(:Segment {idx, pos})        its path, cut in pieces of SEGMENT_SIZE
            -[:CP {pos, ns, class, ...}]->(:Event)      the window's critical path, in order
    (:Event {key, run_id, idx, name, ...})-[:DEP {type, rule, weight, ...}]->(:Event)
    (:Rule {name, doc})                                   what each edge rule reads and why
    (:Meta {key: 'ctda', schema_version, next_run_id})    run ids are never reused
    (:Blob {run_id, name, chunk, data})                   e.g. the run's analysis snapshot
    (:DeviceTime|StreamIdle|CommOverlap|LaunchStat|QueueStat|MemoryStat|KernelStat {run_id})
                                                          the run's breakdowns (docs/breakdowns.md)
    (:Job {id, name, status, world_size, ranks, ...})     a distributed job (ctda ingest DIR)
      -[:HAS_RANK {rank}]->(:Run)                         one run per rank present
      -[:HAS_STEP]->(:JobStep {idx, step, job_step_ns, slowest_rank, straggler, ...})
        -[:JOB_CP {pos, rank, event, ns, class, ...}]->(:Event)   the job path, across ranks
    (:JobLateness|JobWait|JobClock {job_id})              its lateness, collective waits, clocks

An ``Event`` is one analysed trace event (plus a SOURCE and a SINK pseudo event per run,
``kind`` 'source'/'sink', so every dependency edge has two endpoints). ``Event.key`` is
``run_id * KEY_SPAN + idx``: globally unique, so Ladybug can use it as the primary key.
A CP relationship points at the event whose own time it charges, or, for a wait or gap
(``wait = true``), at the event that waited (the edge's destination); either way the
target's ``lane_label`` is the lane the time is spent on. A window's path hangs off
``Segment`` nodes of at most :data:`SEGMENT_SIZE` relationships rather than off the window
itself: the embedded engine deletes a relationship in time growing with the number its
node holds, and one 380k-stretch path took 84 s to delete from a single window node (3 s
from segments of 256). ``(w:Window)-[:HAS_SEGMENT]->()-[c:CP]->(e)`` reads the whole path.
Absent values are nulls (a top-level event's ``parent``, a wait edge's ``owner``): Neo4j does not store them.

A job's path rows point at the rank's ``Event`` whose own time they are; a wait or gap
(``wait = true``, ``event = -1``) points at the event where the path resumes on that rank,
so every row has an endpoint and the rows of a step sum to its ``job_step_ns``. Jobs take
their ids from the run id sequence, and become visible with all their runs at once.
"""

from __future__ import annotations

from dataclasses import dataclass

#: 4: a run being written is invisible to raw queries (Neo4j: staging labels; Ladybug: one
#: transaction); 3: distributed jobs (new tables only); 2: critical paths hang off Segment
#: nodes (1: off the Window); older stores are migrated on first write
SCHEMA_VERSION = 4
#: CP relationships per Segment node
SEGMENT_SIZE = 256
#: analysed-event index space of one run inside ``Event.key``
KEY_SPAN = 1 << 40
BASELINE = "baseline"

#: Run.status values: only 'complete' runs are visible to reports and named queries
PENDING, COMPLETE, DELETING = "pending", "complete", "deleting"


@dataclass(frozen=True)
class Label:
    """A node label or relationship type with its typed properties (first is the key)."""

    name: str
    props: tuple[tuple[str, str], ...]
    ends: tuple[str, str] | None = None  # (from, to) labels for relationships
    indexed: tuple[str, ...] = ()  # properties lookups filter on, besides the key

    @property
    def key(self) -> str:
        return self.props[0][0]

    @property
    def columns(self) -> list[str]:
        return [p for p, _ in self.props]


RUN = Label(
    "Run",
    (
        ("id", "INT64"),
        ("name", "STRING"),
        ("status", "STRING"),
        ("file", "STRING"),
        ("sha256", "STRING"),
        ("ctda_version", "STRING"),
        ("options_json", "STRING"),  # "options" is a reserved word in Ladybug's DDL
        ("options_key", "STRING"),
        ("ingested_at", "STRING"),
        ("heartbeat", "INT64"),
        ("schema_version", "INT64"),
        ("steps", "INT64"),
        ("step_ns", "INT64[]"),
        ("cp_ns", "INT64"),
        ("events", "INT64"),
        ("edges", "INT64"),
        ("t0_ns", "INT64"),
        ("has_gpu", "BOOL"),
        ("checks_json", "STRING"),
        ("graph_json", "STRING"),
        ("trace_json", "STRING"),
    ),
    indexed=("name",),
)
EVENT = Label(
    "Event",
    (
        ("key", "INT64"),
        ("run_id", "INT64"),
        ("idx", "INT64"),
        ("uid", "INT64"),  # row of the event in the trace (ctda convert/inspect numbering)
        ("name", "STRING"),
        ("display_name", "STRING"),  # rollup name: step numbers and object addresses folded
        ("cat", "STRING"),
        ("kind", "STRING"),
        ("pid", "STRING"),
        ("tid", "STRING"),
        ("ts_ns", "INT64"),
        ("dur_ns", "INT64"),
        ("lane_label", "STRING"),  # "thread <tid> (<name>)" or "GPU <d> stream <s>"
        ("step", "INT64"),  # enclosing ProfilerStep number from the trace, null outside
        ("window", "INT64"),  # baseline analysis window holding the start, null outside all
        ("parent", "INT64"),  # idx of the enclosing event on its thread, null at top level
        ("correlation", "INT64"),
        ("external_id", "INT64"),
        ("on_cp", "BOOL"),  # a critical-path edge of some window starts or ends here, or charges it
        ("cp_ns", "INT64"),  # time charged to this event on the critical paths of all windows
        ("self_ns", "INT64"),  # observed self time (the edges it owns)
        ("slack_ns", "INT64"),  # how much its start may slip before a window end moves
        ("class", "STRING"),  # bound-by class of its own time (ctda.analysis.classify)
    ),
    indexed=("run_id",),
)
WINDOW = Label(
    "Window",
    (
        ("key", "STRING"),
        ("run_id", "INT64"),
        ("scenario", "STRING"),
        ("idx", "INT64"),
        ("label", "STRING"),
        ("step", "INT64"),
        ("start_ns", "INT64"),
        ("end_ns", "INT64"),
        ("start_ms", "DOUBLE"),
        ("duration_ns", "INT64"),
        ("cp_ns", "INT64"),
        ("self_ns", "INT64"),
        ("bound_by", "STRING"),
        ("bound_by_share", "DOUBLE"),
        ("event", "INT64"),  # idx of the event bounding it (its start and end points), -1: SOURCE to SINK
    ),
    indexed=("run_id",),
)
SCENARIO = Label(
    "Scenario",
    (
        ("key", "STRING"),
        ("run_id", "INT64"),
        ("name", "STRING"),
        ("overrides_json", "STRING"),
        ("step_ns", "INT64[]"),
        ("cp_ns", "INT64"),
        ("path", "INT64[]"),  # edge ids of the critical path (baseline: whole trace, SOURCE to SINK)
        ("created_at", "STRING"),
        ("data_json", "STRING"),  # a what-if's own record, as its writer saved it
        # a saved what-if's path, packed (scenario_flows.pack_ids): a 1M-id list costs the engine
        # ~0.6 s to parse and checkpoint, the packed form (~1 MB) 0.05 s
        ("path_packed", "BLOB"),
    ),
    indexed=("run_id",),
)
SEGMENT = Label(
    "Segment",
    (
        ("key", "STRING"),  # <window key>/<idx>
        ("run_id", "INT64"),
        ("scenario", "STRING"),  # its window's (so a query from an event needs one hop)
        ("window", "INT64"),  # its window's idx
        ("idx", "INT64"),  # order within the window's path, from 0
        ("pos", "INT64"),  # CP.pos of its first stretch (idx * SEGMENT_SIZE)
    ),
    indexed=("run_id",),
)


#: a run's breakdowns of device time (ctda.analysis.breakdowns), one node per table row;
#: linked to their run by ``run_id`` only (no relationships: they go with the run at once)
def _breakdown(name: str, *props: tuple[str, str], per_window: bool = True) -> Label:
    """A breakdown table's label: ``key`` and ``run_id``, then (most) ``window`` (Window.idx,
    -1: the whole trace) and its ``label``, then the table's own columns."""
    head = (("key", "STRING"), ("run_id", "INT64"))
    where = (("window", "INT64"), ("label", "STRING")) if per_window else ()
    return Label(name, (*head, *where, *props), indexed=("run_id",))


DEVICE_TIME = _breakdown(
    "DeviceTime",
    ("device", "INT64"),
    ("span_ns", "INT64"),
    ("compute_ns", "INT64"),
    ("communication_ns", "INT64"),
    ("memory_ns", "INT64"),
    ("idle_ns", "INT64"),
)
STREAM_IDLE = _breakdown(
    "StreamIdle",
    ("device", "INT64"),
    ("stream", "INT64"),
    ("idle", "STRING"),  # host_wait, kernel_wait, other
    ("idle_ns", "INT64"),
    ("cp_ns", "INT64"),  # the critical path's device-idle waits in it
)
KERNEL_STAT = _breakdown(
    "KernelStat",
    ("name", "STRING"),
    ("class", "STRING"),  # compute, communication, memory
    ("count", "INT64"),
    ("total_ns", "INT64"),
    ("mean_ns", "DOUBLE"),
    ("p50_ns", "DOUBLE"),
    ("p95_ns", "DOUBLE"),
    ("cp_ns", "INT64"),
    per_window=False,
)
COMM_OVERLAP = _breakdown(
    "CommOverlap",
    ("device", "INT64"),
    ("communication_ns", "INT64"),
    ("overlapped_ns", "INT64"),  # under compute
    ("overlap_share", "DOUBLE"),
    ("exposed_ns", "INT64"),
    ("cp_ns", "INT64"),  # critical-path time in communication kernels
)
LAUNCH_STAT = _breakdown(
    "LaunchStat",
    ("launches", "INT64"),
    ("call_p50_ns", "DOUBLE"),
    ("call_p95_ns", "DOUBLE"),
    ("call_outliers", "INT64"),
    ("delay_p50_ns", "DOUBLE"),
    ("delay_p95_ns", "DOUBLE"),
    ("delay_max_ns", "INT64"),
    ("delay_outliers", "INT64"),
    ("delay_ns", "INT64"),
    ("short_kernels", "INT64"),
    ("shorter_than_call", "INT64"),
    ("cp_delay_ns", "INT64"),  # the path's launch_overhead class
)
QUEUE_STAT = _breakdown(
    "QueueStat",
    ("device", "INT64"),
    ("stream", "INT64"),
    ("max_length", "INT64"),
    ("mean_length", "DOUBLE"),
    ("full_ns", "INT64"),
)
MEMORY_STAT = _breakdown(
    "MemoryStat",
    ("device", "INT64"),  # -1: host memory
    ("allocations", "INT64"),
    ("allocated_bytes", "INT64"),
    ("frees", "INT64"),
    ("freed_bytes", "INT64"),
    ("start_bytes", "INT64"),
    ("end_bytes", "INT64"),
    ("peak_bytes", "INT64"),
    ("peak_reserved_bytes", "INT64"),
)
#: breakdown kind (ctda.analysis.breakdowns.KINDS) -> its label ("classes" is a rollup of kernels)
BREAKDOWN_LABELS = {
    "temporal": DEVICE_TIME,
    "idle": STREAM_IDLE,
    "overlap": COMM_OVERLAP,
    "launches": LAUNCH_STAT,
    "queues": QUEUE_STAT,
    "memory": MEMORY_STAT,
    "kernels": KERNEL_STAT,
}
RULE = Label("Rule", (("name", "STRING"), ("doc", "STRING")))
#: opaque per-run payloads, cut in chunks (the what-if engine's columnar snapshot)
BLOB = Label(
    "Blob",
    (("key", "STRING"), ("run_id", "INT64"), ("name", "STRING"), ("chunk", "INT64"), ("data", "BLOB")),
    indexed=("run_id",),
)
BLOB_CHUNK = 4 << 20
#: one node: the schema version and the run id sequence (also a lock for Neo4j writers)
META = Label(
    "Meta",
    (
        ("key", "STRING"),
        ("schema_version", "INT64"),
        ("next_run_id", "INT64"),
        ("lock", "INT64"),
        ("ddl", "STRING"),  # the fingerprint of the DDL that made the store (see Store._ensure_schema)
    ),
)
META_KEY = "ctda"

DEP = Label(
    "DEP",
    (
        ("edge", "INT64"),  # edge id within the run (Scenario.path and CP.edge use it)
        ("type", "STRING"),  # ctda.analysis.edges.EdgeType, lower case
        ("rule", "STRING"),  # the rule that made it (see the Rule nodes)
        ("weight", "INT64"),  # calibrated weight (ns)
        ("gap", "INT64"),  # observed time between its endpoints (ns)
        ("binding", "BOOL"),  # the last-arriving predecessor of its destination
        ("on_cp", "BOOL"),  # on the critical path of some window
        ("src_end", "BOOL"),  # the edge leaves the source event's end (else its start)
        ("dst_end", "BOOL"),  # the edge enters the destination event's end (else its start)
        ("owner", "INT64"),  # idx of the event whose own time this edge is, null for waits
    ),
    ("Event", "Event"),
)
CP = Label(
    "CP",
    (
        ("pos", "INT64"),  # order along the window's path, from 0
        ("edge", "INT64"),  # the DEP edge (DEP.edge)
        ("t0", "INT64"),  # start of the charged interval, clipped to the window (ns)
        ("ns", "INT64"),  # time charged
        ("rule", "STRING"),  # the edge's rule (its type is on the DEP edge: strings are costly)
        ("class", "STRING"),  # bound-by class of this stretch of the path
        ("wait", "BOOL"),  # a wait or gap: points at the waiting event, not a charged one
    ),
    ("Segment", "Event"),
)
HAS_SCENARIO = Label("HAS_SCENARIO", (), ("Run", "Scenario"))
HAS_WINDOW = Label("HAS_WINDOW", (), ("Scenario", "Window"))
HAS_SEGMENT = Label("HAS_SEGMENT", (), ("Window", "Segment"))

JOB = Label(
    "Job",
    (
        ("id", "INT64"),  # from the run id sequence
        ("name", "STRING"),
        ("status", "STRING"),  # as Run.status: pending, complete, deleting
        ("world_size", "INT64"),
        ("ranks", "INT64[]"),  # the ranks present (each has a run: HAS_RANK)
        ("missing", "INT64[]"),  # ranks of the world absent from the job (a partial job)
        ("sha256", "STRING"),  # digest of the ranks' file digests: the idempotency key
        ("options_json", "STRING"),
        ("options_key", "STRING"),
        ("ctda_version", "STRING"),
        ("ingested_at", "STRING"),
        ("heartbeat", "INT64"),
        ("steps", "INT64"),
        ("cp_ns", "INT64"),  # sum of the job steps
        ("notes_json", "STRING"),
        ("checks_json", "STRING"),
        ("matching_json", "STRING"),
    ),
    indexed=("name",),
)
JOB_STEP = Label(
    "JobStep",
    (
        ("key", "STRING"),  # <job id>/<idx>
        ("job_id", "INT64"),
        ("idx", "INT64"),  # order of the job's steps, from 0
        ("step", "STRING"),  # the window label shared by the ranks (ProfilerStep#N)
        ("job_step_ns", "INT64"),  # the job step, bounded by its collectives (docs/jobs.md)
        ("slowest_rank", "INT64"),
        ("fastest_rank_step_ns", "INT64"),
        ("straggler", "INT64"),  # -1: no rank arrived late
        ("late_ns", "INT64"),  # the straggler's lateness
        ("path_by_rank", "STRING"),
        ("straggler_top", "STRING"),  # the path's top item on the straggler
        ("last_to_arrive", "INT64"),  # may differ from the straggler (docs/host-contention.md)
        ("host_contention", "STRING"),  # the stalls the straggler caused on its host
        ("straggler_own", "STRING"),  # the straggler's own extra work / stalls
        ("late_by_rank_json", "STRING"),
        ("charged_by_rank_json", "STRING"),  # lateness after host-contention charges
    ),
    indexed=("job_id",),
)


def _job_table(name: str, *props: tuple[str, str]) -> Label:
    """A job's table: ``key`` and ``job_id`` then its columns; goes with its job at once."""
    return Label(name, (("key", "STRING"), ("job_id", "INT64"), *props), indexed=("job_id",))


#: each rank's arrival at a step's collectives minus the median arrival, summed
JOB_LATENESS = _job_table(
    "JobLateness", ("idx", "INT64"), ("step", "STRING"), ("rank", "INT64"), ("late_ns", "INT64")
)
#: each collective completion on the job path: wait for the last rank, then the transfer
JOB_WAIT = _job_table(
    "JobWait",
    ("idx", "INT64"),
    ("label", "STRING"),
    ("cid", "INT64"),
    ("op", "STRING"),
    ("rank", "INT64"),
    ("waited_for", "INT64"),
    ("wait_ns", "INT64"),
    ("transfer_ns", "INT64"),
)
JOB_CLOCK = _job_table(
    "JobClock",
    ("rank", "INT64"),
    ("host", "STRING"),
    ("rank_from", "STRING"),
    ("offset_ns", "INT64"),
    ("how", "STRING"),
)
HAS_RANK = Label("HAS_RANK", (("rank", "INT64"),), ("Job", "Run"))
HAS_STEP = Label("HAS_STEP", (), ("Job", "JobStep"))
JOB_CP = Label(
    "JOB_CP",
    (
        ("pos", "INT64"),  # order along the step's job path, from 0
        ("rank", "INT64"),
        ("event", "INT64"),  # the target's idx; -1 for a wait or gap (see the module doc)
        ("name", "STRING"),
        ("class", "STRING"),
        ("t0", "INT64"),  # the job's clock (clock offsets applied), ns
        ("t1", "INT64"),
        ("ns", "INT64"),
        ("wait", "BOOL"),
    ),
    ("JobStep", "Event"),
)
JOB_TABLES = (JOB_STEP, JOB_LATENESS, JOB_WAIT, JOB_CLOCK)

NODES = (
    RUN,
    EVENT,
    WINDOW,
    SEGMENT,
    SCENARIO,
    RULE,
    META,
    BLOB,
    *BREAKDOWN_LABELS.values(),
    JOB,
    *JOB_TABLES,
)
RELS = (DEP, CP, HAS_SCENARIO, HAS_WINDOW, HAS_SEGMENT, HAS_RANK, HAS_STEP, JOB_CP)


#: labels of the nodes a run or job owns; on Neo4j a pending run's nodes carry
#: :func:`staged` labels instead, relabelled by the flip (docs/security.md)
OWNED = tuple(label for label in NODES if label not in (RULE, META))
STAGED_PREFIX = "Pending"


def staged(name: str) -> str:
    """The label ``name`` nodes carry on Neo4j while their run is written (``PendingEvent``):
    no query a user types may read it, so no raw query sees a run before its flip."""
    return STAGED_PREFIX + name


#: every staging label (the query gate refuses a plan that names one)
STAGED_LABELS = frozenset(staged(label.name) for label in OWNED)


def event_key(run_id: int, idx: int) -> int:
    """Global key of analysed event ``idx`` of run ``run_id``."""
    return run_id * KEY_SPAN + idx


def window_key(run_id: int, scenario: str, idx: int) -> str:
    return f"{run_id}/{scenario}/{idx}"


def segment_key(window: str, idx: int) -> str:
    return f"{window}/{idx}"


def scenario_key(run_id: int, scenario: str) -> str:
    return f"{run_id}/{scenario}"


def blob_key(run_id: int, name: str, chunk: int) -> str:
    return f"{run_id}/{name}/{chunk}"


def blob_chunks(run_id: int, name: str, data: bytes) -> list[dict[str, object]]:
    """Blob node properties for ``data`` (at least one chunk, so empty data round-trips)."""
    parts = [data[i : i + BLOB_CHUNK] for i in range(0, len(data), BLOB_CHUNK)] or [b""]
    return [
        {"key": blob_key(run_id, name, k), "run_id": run_id, "name": name, "chunk": k, "data": part}
        for k, part in enumerate(parts)
    ]
