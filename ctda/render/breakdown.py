"""The documents of ``ctda breakdown``: one section per breakdown kind."""

from __future__ import annotations

from rich.text import Text

from ctda.analysis.breakdowns import Breakdowns, JobBreakdowns
from ctda.render.output import Block, Col, Document, Section

TEMPORAL_COLS = [
    Col("label", "window"),
    Col("device", "device", "int"),
    Col("span_ns", "span ms", "ms"),
    Col("compute_ns", "compute ms", "ms"),
    Col("compute_share", "compute", "pct"),
    Col("communication_ns", "comm ms", "ms"),
    Col("communication_share", "comm", "pct"),
    Col("memory_ns", "memory ms", "ms"),
    Col("memory_share", "memory", "pct"),
    Col("idle_ns", "idle ms", "ms"),
    Col("idle_share", "idle", "pct"),
]
IDLE_COLS = [
    Col("label", "window"),
    Col("device", "device", "int"),
    Col("stream", "stream", "int"),
    Col("idle", "idle kind"),
    Col("idle_ns", "idle ms", "ms"),
    Col("cp_ns", "on the path ms", "ms"),
]
CLASS_COLS = [
    Col("class", "class"),
    Col("count", "kernels", "int"),
    Col("total_ns", "time ms", "ms"),
    Col("share", "share", "pct"),
    Col("cp_ns", "on the path ms", "ms"),
]
KERNEL_COLS = [
    Col("name", "kernel"),
    Col("class", "class"),
    Col("count", "count", "int"),
    Col("total_ns", "time ms", "ms"),
    Col("mean_ns", "mean ms", "ms"),
    Col("p50_ns", "p50 ms", "ms"),
    Col("p95_ns", "p95 ms", "ms"),
    Col("cp_ns", "on the path ms", "ms"),
]
OVERLAP_COLS = [
    Col("label", "window"),
    Col("device", "device", "int"),
    Col("communication_ns", "comm ms", "ms"),
    Col("overlapped_ns", "under compute ms", "ms"),
    Col("overlap_share", "overlap", "pct"),
    Col("exposed_ns", "exposed ms", "ms"),
    Col("cp_ns", "on the path ms", "ms"),
]
LAUNCH_COLS = [
    Col("label", "window"),
    Col("launches", "launches", "int"),
    Col("call_p50_ns", "call p50 ms", "ms"),
    Col("call_p95_ns", "call p95 ms", "ms"),
    Col("call_outliers", "calls > 50 us", "int"),
    Col("delay_p50_ns", "delay p50 ms", "ms"),
    Col("delay_p95_ns", "delay p95 ms", "ms"),
    Col("delay_max_ns", "delay max ms", "ms"),
    Col("delay_outliers", "delays > 100 us", "int"),
    Col("short_kernels", "kernels < 10 us", "int"),
    Col("cp_delay_ns", "delay on the path ms", "ms"),
]
QUEUE_COLS = [
    Col("label", "window"),
    Col("device", "device", "int"),
    Col("stream", "stream", "int"),
    Col("max_length", "longest queue", "int"),
    Col("mean_length", "mean queue", "f3"),
    Col("full_ns", "full ms", "ms"),
]
MEMORY_COLS = [
    Col("label", "window"),
    Col("device", "device (-1 host)", "int"),
    Col("allocations", "allocations", "int"),
    Col("allocated_bytes", "allocated MB", "mb"),
    Col("frees", "frees", "int"),
    Col("start_bytes", "at start MB", "mb"),
    Col("peak_bytes", "peak MB", "mb"),
    Col("end_bytes", "at end MB", "mb"),
    Col("peak_reserved_bytes", "peak reserved MB", "mb"),
]
#: kind -> (title, columns)
SECTIONS = {
    "temporal": ("Temporal breakdown per window and device", TEMPORAL_COLS),
    "idle": ("Device idle time per stream, and how much of it is on the critical path", IDLE_COLS),
    "overlap": ("Communication under compute, and exposed", OVERLAP_COLS),
    "launches": ("Launches: call time, launch delay, and the delay on the critical path", LAUNCH_COLS),
    "queues": ("Launch queue per stream (launched, not yet started)", QUEUE_COLS),
    "memory": ("Allocator: allocations, and allocated memory per device", MEMORY_COLS),
    "classes": ("Kernel classes", CLASS_COLS),
    "kernels": ("Kernels by total time", KERNEL_COLS),
}


def breakdown_doc(b: Breakdowns | JobBreakdowns, label: str, kinds: list[str], top: int) -> Document:
    """The chosen breakdowns of one analysis, or of each rank of a job (a ``rank`` column
    first); ``top`` bounds the kernel list (per rank). Without device work only the
    allocator's table can have rows (host memory)."""
    blocks: list[Block] = []
    data: dict[str, object] = {"device": b.has_device}
    if not b.has_device:
        blocks.append(Text("no device activity: the trace has no GPU work"))
        kinds = [k for k in kinds if k == "memory" and len(b.table(k))]
    for kind in kinds:
        frame = b.table(kind)
        title, cols = SECTIONS[kind]
        if "rank" in frame.columns:
            cols = [Col("rank", "rank", "int"), *cols]
            if kind == "kernels":
                frame = frame.groupby("rank", sort=True).head(top)
        elif kind == "kernels":
            frame = frame.head(top)
        blocks.append(Section.of(kind, title, frame, cols))
        data[kind] = frame.to_dict(orient="records")
    return Document(f"Breakdowns of {label}", blocks, data=data, source=label)
