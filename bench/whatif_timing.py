"""What-if timings inside a measuring child: fastest-of-:data:`REPEAT` scenario re-propagations.

The analyze suite's child (:mod:`bench.suite_analyze`) calls :func:`measure_whatif` right
after its analysis; the whatif suite (:mod:`bench.suite_whatif`) turns the figures into
its table. Kept apart from both so that neither suite imports the other.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

__all__ = ["LOADED_MAX_EVENTS", "REPEAT", "SCENARIOS", "measure_whatif"]

#: scenarios tried on every trace; those matching no event are skipped
SCENARIOS = (
    "cat=kernel=0.5",
    "class=cpu=0.5",
    "class=launch_overhead=0",
    "name~^aten::=0.8",
    "class=gpu_comm=0.5",
    "class=sync_wait=0",
    "class=gpu_memcpy=2",
)
REPEAT = 3  #: runs per scenario; the fastest counts (the median is over scenarios)
#: above this many events the snapshot round trip (~17 s at 1e7) is skipped to keep the suite short
LOADED_MAX_EVENTS = 2_000_000


def _time_scenarios(a: Any, specs: tuple[str, ...]) -> dict[str, Any]:
    """Fastest-of-REPEAT ``scenario.run`` per matching spec; median and max over specs."""
    from ctda.whatif import scenario
    from ctda.whatif.select import SelectionError, parse_scale

    overrides = []
    for spec in specs:
        try:
            overrides.append(parse_scale(a, spec))
        except SelectionError:
            continue
    if not overrides:
        return {"n_scenarios": 0}
    scenario.run(a, overrides[:1])  # warm-up: caches and compiled code
    per: dict[str, float] = {}
    per_cpu: dict[str, float] = {}
    changes: dict[str, float] = {}
    for o in overrides:
        best, best_cpu = float("inf"), float("inf")
        for _ in range(REPEAT):
            t0, c0 = time.perf_counter(), time.process_time()
            sc = scenario.run(a, [o])
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        per[o.label] = best * 1000
        per_cpu[o.label] = best_cpu * 1000
        st = sc.step_times()
        base = float(st.base_ns.sum())
        changes[o.label] = float(st.predicted_ns.sum()) / base - 1 if base > 0 else 0.0
    ms = list(per.values())
    return {
        "n_scenarios": len(ms),
        "median_ms": statistics.median(ms),
        "max_ms": max(ms),
        "median_cpu_ms": statistics.median(per_cpu.values()),
        "per_scenario_ms": per,
        "per_scenario_cpu_ms": per_cpu,
        "predicted_change": changes,
    }


def measure_whatif(a: Any, specs: tuple[str, ...] = SCENARIOS, *, loaded: bool = True) -> dict[str, Any]:
    """What-if timings on ``a`` in memory and (with ``loaded``) on its snapshot round trip."""
    from ctda.analysis import snapshot

    out: dict[str, Any] = {"in_memory": _time_scenarios(a, specs)}
    if not loaded:
        return out
    t0 = time.perf_counter()
    blob = snapshot.dump(a)
    out["snapshot_dump_s"] = time.perf_counter() - t0
    out["snapshot_mb"] = len(blob) / 1e6
    t0 = time.perf_counter()
    restored = snapshot.load(blob)
    out["snapshot_load_s"] = time.perf_counter() - t0
    del blob
    out["loaded"] = _time_scenarios(restored, specs)
    return out
