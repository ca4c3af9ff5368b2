"""HTA-compatible mode: HolisticTraceAnalysis' critical-path graph, weights and path.

HolisticTraceAnalysis (``hta.analyzers.critical_path_analysis``) builds a graph with the
same node model as ctda (a start and an end node per event) but fixed weights, and takes
its critical path as the *longest* weighted path through that DAG. This package rebuilds
HTA's edges over ctda's nodes (event ``i`` owns nodes ``2i``/``2i+1``) so a user can
reproduce HTA's answer and compare it with ctda's replay-calibrated one.

HTA's graph, as implemented here (weights are observed time gaps unless said otherwise):

* Events: CPU operators and runtime/driver calls (cats ``cpu_op``, ``cuda_runtime``,
  ``cuda_driver``; ctda's kinds, so also the legacy ``Operator``/``Runtime`` spellings)
  with ``dur > 0`` that start inside the window, and the GPU work they launched (kernels,
  copies, sets paired by ``args.correlation``).
* **operator** edges walk each CPU thread's call stack: parent start -> first child start,
  child end -> next child start, last child end -> parent end, a leaf's start -> end. The
  edge into the end of a blocking call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
  ``cudaEventQuery``, ``cudaEventSynchronize``, ``cudaMemcpy``, ``cudaMemcpyAsync``) weighs
  0: its wait is expressed by a sync edge instead. A GPU work item's start -> end is an
  operator edge too.
* **dependency** edges (weight 0) chain consecutive top-level operators of a thread: the
  time a thread spends outside any operator (Python, data loading, idling) is never on
  HTA's path ("CPU gaps weigh 0").
* **kernel launch delay**: runtime call start -> its kernel's start, only when the stream
  was idle at the launch (the stream's queue length, +1 per launch, -1 per kernel start,
  over the whole trace, is 1 right after the launch and 0 right after the kernel starts)
  and the previous kernel on the stream (and a stream-wait source, if any) ended before
  the launch.
* **kernel-kernel delay**: otherwise, previous kernel end -> kernel start on the stream
  (newer HTA: only across gaps up to 1.5 ms; a longer gap means something unrecorded held
  the stream, and the kernel gets no incoming edge at all).
* **sync dependency** (weight 0): from the ``cuda_sync`` records. Stream Sync: last
  kernel started on that stream (kernels ordered by start, sync records by end) -> end of
  the runtime call; Context Sync: the last kernel of every stream seen so far -> end of the
  call; Event Sync: the kernel launched last on the recorded stream before the matching
  ``cudaEventRecord`` -> end of the call; Stream Wait Event: that kernel -> start of the
  next kernel launched from the same thread onto the waiting stream.
* Cross-thread: none, except (newer HTA, after the 0.5.0 release) the backward thread is
  merged into the forward thread before the call stacks are walked, and calls that take
  the CUDA runtime lock (``cudaLaunchKernel``, ``cudaMemcpyAsync``, ``cudaHostAlloc``) are
  chained by completion order across threads; that rule also gives those calls their full
  duration (``cudaMemcpyAsync`` is no longer zeroed). :class:`HtaOptions` selects these.

What HTA's loader does first is reproduced too: fractional-microsecond timestamps are
rounded inward to whole microseconds, the last ProfilerStep is dropped when there are two
or more, a launching call is paired with one device row only (the last sharing its
correlation, so only one kernel of a graph launch takes part), and CPU slices carrying an
integer ``args.stream`` are dropped.

The path is networkx' ``dag_longest_path`` with HTA's weights, reproduced with its tie
rules (first maximal predecessor in edge insertion order; the first node in networkx'
topological order among those of maximal distance ends the path), so the set of events on
the path matches HTA's ``args.critical`` marks exactly. Its length is HTA's critical path
length, usually shorter than the window since CPU gaps and waits weigh nothing.

Use :func:`hta_analysis` for the whole answer. HTA's edges are also declared as ctda edge
rules (family ``hta``, :mod:`~ctda.analysis.hta.rules`), which is how ``--mode hta`` builds
a ctda graph: :func:`graph_weights` gives its edges their HTA weights and
:func:`~ctda.analysis.hta.weights.calibration` marks HTA's path on it.

Modules: :mod:`.model` (edge types, options, the edge list), :mod:`.clock` (what HTA's
loader keeps), :mod:`.cpu` and :mod:`.gpu` (the two passes that build edges), :mod:`.edges`
(both passes in HTA's order), :mod:`.longest_path`, :mod:`.result`, :mod:`.rules`,
:mod:`.weights`.
"""

from __future__ import annotations

from ctda.analysis.hta import rules
from ctda.analysis.hta.edges import build_edges, edges_of
from ctda.analysis.hta.longest_path import longest_path
from ctda.analysis.hta.model import (
    BLOCKING_SYNC_CALLS,
    DEFAULT_OPTIONS,
    HTA_NAMES,
    LAUNCH_CALLS,
    RUNTIME_LOCK_CALLS,
    HtaEdge,
    HtaEdges,
    HtaOptions,
)
from ctda.analysis.hta.result import HtaResult, hta_analysis, hta_critical_path
from ctda.analysis.hta.weights import calibration, graph_weights

__all__ = [
    "BLOCKING_SYNC_CALLS",
    "DEFAULT_OPTIONS",
    "HTA_NAMES",
    "LAUNCH_CALLS",
    "RUNTIME_LOCK_CALLS",
    "HtaEdge",
    "HtaEdges",
    "HtaOptions",
    "HtaResult",
    "build_edges",
    "calibration",
    "edges_of",
    "graph_weights",
    "hta_analysis",
    "hta_critical_path",
    "longest_path",
    "rules",
]
