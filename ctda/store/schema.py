"""The store's data model, declared once for both backends.

Labels and their properties (types use Ladybug's names; Neo4j is schemaless and only gets
constraints and indexes)::

    (:Run {id, name, status, file, sha256, ...})         one per ingested trace
      -[:HAS_SCENARIO]->(:Scenario {name: 'baseline'})   the observed replay (later: what-ifs)
        -[:HAS_WINDOW]->(:Window {idx, label, step, ...}) one per analysis window
          -[:CP {pos, ns, class, ...}]->(:Event)          the window's critical path, in order
    (:Event {key, run_id, idx, name, ...})-[:DEP {type, rule, weight, ...}]->(:Event)
    (:Rule {name, doc})                                   what each edge rule reads and why
    (:Meta {key: 'ctda', schema_version, next_run_id})    run ids are never reused

An ``Event`` is one analysed trace event (plus a SOURCE and a SINK pseudo event per run,
``kind`` 'source'/'sink', so every dependency edge has two endpoints). ``Event.key`` is
``run_id * KEY_SPAN + idx``: globally unique, so Ladybug can use it as the primary key.
A CP relationship points at the event whose own time it charges, or, for a wait or gap
(``wait = true``), at the event that waited (the edge's destination).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1
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
)
EVENT = Label(
    "Event",
    (
        ("key", "INT64"),
        ("run_id", "INT64"),
        ("idx", "INT64"),
        ("uid", "INT64"),
        ("name", "STRING"),
        ("display_name", "STRING"),  # rollup name: step numbers and object addresses folded
        ("cat", "STRING"),
        ("kind", "STRING"),
        ("pid", "STRING"),
        ("tid", "STRING"),
        ("ts_ns", "INT64"),
        ("dur_ns", "INT64"),
        ("end_ns", "INT64"),
        ("lane", "INT64"),
        ("lane_label", "STRING"),
        ("is_gpu", "BOOL"),
        ("step", "INT64"),  # enclosing ProfilerStep number from the trace, -1 outside
        ("window", "INT64"),  # baseline analysis window holding the start, -1 outside all
        ("parent", "INT64"),
        ("depth", "INT64"),
        ("correlation", "INT64"),
        ("external_id", "INT64"),
        ("device", "INT64"),
        ("stream", "INT64"),
        ("sequence_nr", "INT64"),
        ("on_cp", "BOOL"),
        ("cp_ns", "INT64"),
        ("self_ns", "INT64"),
        ("slack_ns", "INT64"),
        ("class", "STRING"),
    ),
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
    ),
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
        ("path", "INT64[]"),  # edge ids of the whole-trace critical path, SOURCE to SINK
        ("created_at", "STRING"),
    ),
)
RULE = Label("Rule", (("name", "STRING"), ("doc", "STRING")))
#: one node: the schema version and the run id sequence (also a lock for Neo4j writers)
META = Label("Meta", (("key", "STRING"), ("schema_version", "INT64"), ("next_run_id", "INT64"), ("lock", "INT64")))
META_KEY = "ctda"

DEP = Label(
    "DEP",
    (
        ("edge", "INT64"),
        ("type", "STRING"),
        ("rule", "STRING"),
        ("weight", "INT64"),
        ("gap", "INT64"),
        ("binding", "BOOL"),
        ("on_cp", "BOOL"),
        ("src_end", "BOOL"),  # the edge leaves the source event's end (else its start)
        ("dst_end", "BOOL"),
        ("owner", "INT64"),  # idx of the event whose own time this edge is, -1 for waits
    ),
    ("Event", "Event"),
)
CP = Label(
    "CP",
    (
        ("pos", "INT64"),
        ("edge", "INT64"),
        ("t0", "INT64"),
        ("t1", "INT64"),
        ("ns", "INT64"),
        ("type", "STRING"),
        ("rule", "STRING"),
        ("class", "STRING"),
        ("wait", "BOOL"),
        ("name", "STRING"),  # charged event's display name, or the wait's label
        ("lane", "STRING"),  # lane of the edge's destination event
    ),
    ("Window", "Event"),
)
HAS_SCENARIO = Label("HAS_SCENARIO", (), ("Run", "Scenario"))
HAS_WINDOW = Label("HAS_WINDOW", (), ("Scenario", "Window"))

NODES = (RUN, EVENT, WINDOW, SCENARIO, RULE, META)
RELS = (DEP, CP, HAS_SCENARIO, HAS_WINDOW)


def event_key(run_id: int, idx: int) -> int:
    """Global key of analysed event ``idx`` of run ``run_id``."""
    return run_id * KEY_SPAN + idx


def window_key(run_id: int, scenario: str, idx: int) -> str:
    return f"{run_id}/{scenario}/{idx}"


def scenario_key(run_id: int, scenario: str) -> str:
    return f"{run_id}/{scenario}"
