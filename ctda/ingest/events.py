"""Stage 2: the typed shape of one trace event, decoded straight from JSON by msgspec.

Only the fields later stages read are declared; msgspec skips every other key without
building Python objects for it, which is what makes decoding fast and small. Field
aliases cover the spellings Kineto used over the years (``External id`` / ``external id``,
``Ev Idx`` / ``Profiler Event Index``).
"""

from __future__ import annotations

import msgspec

Num = int | float
IdLike = int | str
#: integer-valued args; some writers emit them as strings, which the column stage parses
LooseInt = int | float | str | None


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys later stages need (dependency rules, step and launch matching)."""

    correlation: LooseInt = None
    external_id: LooseInt = msgspec.field(default=None, name="External id")
    external_id_old: LooseInt = msgspec.field(default=None, name="external id")
    ev_idx: LooseInt = msgspec.field(default=None, name="Ev Idx")
    ev_idx_new: LooseInt = msgspec.field(default=None, name="Profiler Event Index")
    device: LooseInt = None
    stream: LooseInt = None
    stream_id: LooseInt = None
    sync_kind: str | None = msgspec.field(default=None, name="cuda_sync_kind")
    wait_on_stream: LooseInt = None
    wait_on_event_corr: LooseInt = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")
    python_id: LooseInt = msgspec.field(default=None, name="Python id")
    python_parent_id: LooseInt = msgspec.field(default=None, name="Python parent id")
    fwd_thread_id: LooseInt = msgspec.field(default=None, name="Fwd thread id")
    sequence_nr: LooseInt = msgspec.field(default=None, name="Sequence number")
    nbytes: LooseInt = msgspec.field(default=None, name="bytes")
    # collectives (record_param_comms ops and, in newer traces, NCCL kernels): job matching keys
    coll_seq: LooseInt = msgspec.field(default=None, name="Seq")
    pg_name: LooseInt = msgspec.field(default=None, name="Process Group Name")
    in_msg_nelems: LooseInt = msgspec.field(default=None, name="In msg nelems")
    # allocator instants ("[memory]"): the change, the totals after it, the device (-1: CPU)
    mem_bytes: LooseInt = msgspec.field(default=None, name="Bytes")
    total_allocated: LooseInt = msgspec.field(default=None, name="Total Allocated")
    total_reserved: LooseInt = msgspec.field(default=None, name="Total Reserved")
    device_id: LooseInt = msgspec.field(default=None, name="Device Id")
    # operator input shapes and dtypes (traces recorded with ``record_shapes=True``), kept as
    # their JSON text: only the few ops a model reads parse them, once per distinct value
    input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Concrete Inputs")
    # metadata events (ph M) carry their payload here: process/thread names and labels
    name: str | None = None
    labels: str | None = None


class Event(msgspec.Struct, gc=False):
    """One ``traceEvents`` entry. ``ts``/``dur`` are microseconds, int or float."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: Num | None = None
    dur: Num | None = None
    pid: IdLike = ""
    tid: IdLike = ""
    id: IdLike | None = None
    bp: str | None = None
    args: Args | None = None


class RawTs(msgspec.Struct, gc=False):
    """Just the timestamp's JSON text, for exact ns when float64 cannot hold it (see columns)."""

    ts: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


EVENT_LIST = msgspec.json.Decoder(list[Event])
RAW_TS_LIST = msgspec.json.Decoder(list[RawTs])
METADATA = msgspec.json.Decoder(dict[str, msgspec.Raw])
