"""The names ``--help`` lists, without the engine: the analysis modes (with their summaries),
the cross-thread rules and the breakdown kinds. The registries that own them
(:mod:`ctda.analysis.modes`, the rule registry, :mod:`ctda.analysis.breakdowns`) import
numpy, pandas and numba, most of a second: too slow for ``ctda --help``.

:mod:`ctda.analysis.modes` takes its summaries from here; the other names are their
registries', in the same order (a test checks that they are).
"""

from __future__ import annotations

#: mode name -> one-line summary, in the order the modes are declared
MODE_SUMMARIES: dict[str, str] = {
    "ctda": "dependency-aware: structural and cross-thread rules, replay-calibrated weights",
    "hta": "HolisticTraceAnalysis' rules and fixed weights, longest path over the whole trace",
}

#: the cross-thread rules ``--cross-thread`` selects from, in the order they run
CROSS_THREAD: tuple[str, ...] = ("fwdbwd", "backward_join", "gil", "cuda_lock", "wake")

#: HTA mode's rules, in the order they run: its package is imported only when they are
#: asked for, and a plugin may not take their names meanwhile
HTA_RULES: tuple[str, ...] = (
    "hta_operator",
    "hta_dependency",
    "hta_launch_delay",
    "hta_kernel_kernel_delay",
    "hta_sync_dependency",
)

#: the breakdowns ``ctda breakdown --kind`` selects from
BREAKDOWN_KINDS: tuple[str, ...] = (
    "temporal",
    "idle",
    "overlap",
    "launches",
    "queues",
    "memory",
    "classes",
    "kernels",
)
