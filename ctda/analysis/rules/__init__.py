"""Edge rules: one function per dependency family, each returning an EdgeBatch.

Every rule's docstring names the trace fields it reads and why the dependency is real.
The registry below is the single list the graph builder walks; cross-thread rules can be
switched off by name (``--cross-thread``).
"""

from __future__ import annotations

from collections.abc import Callable

from ctda.analysis.edges import EdgeBatch
from ctda.analysis.rules import cpu, cross_thread, gpu
from ctda.analysis.rules.context import RuleContext

Rule = Callable[[RuleContext], EdgeBatch]

STRUCTURAL: tuple[Rule, ...] = (
    cpu.duration,
    cpu.nesting,
    cpu.thread_sequence,
    gpu.stream_sequence,
    gpu.launch,
    gpu.sync_recorded,
    gpu.sync_inferred,
    gpu.blocking_copy,
    gpu.stream_wait_event,
    gpu.stream_wait_inferred,
)

CROSS_THREAD: dict[str, Rule] = {
    "fwdbwd": cross_thread.fwdbwd,
    "backward_join": cross_thread.backward_join,
    "gil": cross_thread.gil_handoff,
    "cuda_lock": cross_thread.cuda_runtime_lock,
}

__all__ = ["CROSS_THREAD", "STRUCTURAL", "Rule", "RuleContext"]
