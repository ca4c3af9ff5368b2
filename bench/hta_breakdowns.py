"""HolisticTraceAnalysis's breakdowns of traces, as reference values for ctda's tests.

Run by the HTA venv's python (see :mod:`bench.hta_env`), never by ctda's::

    python bench/hta_breakdowns.py OUT.json TRACE...

For each trace it records HTA 0.5.0's temporal, GPU kernel-type and idle-time breakdowns,
its communication/computation overlap, launch statistics (summed) and queue-length
summary (one rank, the last profiler step kept, as :mod:`bench.hta_runner` loads
traces), or the error HTA raised. ``make hta-breakdowns`` regenerates the committed
``tests/data/hta_breakdowns.json`` over the corpus; ``tests/test_breakdown.py`` compares
ctda's numbers with it. Stand-alone on purpose: standard library and ``hta``.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

from hta_runner import first_line, trace_rank  # same directory: run as a script

#: HTA's default for get_idle_time_breakdown (its docs: a gap shorter than this between
#: two kernels is "kernel wait"); trace_analysis.py passes it in HTA's time unit
KERNEL_DELAY = 30


def records(df: Any) -> list[dict[str, Any]]:
    """Rows of a DataFrame as plain JSON values (numpy scalars unwrapped)."""
    out = []
    for row in df.reset_index().to_dict(orient="records"):
        out.append({str(k): (v.item() if hasattr(v, "item") else v) for k, v in row.items()})
    return out


def launch_summary(df: Any) -> Any:
    """HTA's per-launch table in sums and counts (HTA's cutoffs: 50 and 100 us)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "launches": len(df),
                "delay_sum": float(df.launch_delay.sum()),
                "call_sum": float(df.cpu_duration.sum()),
                "call_outliers": int((df.cpu_duration > 50).sum()),
                "delay_outliers": int((df.launch_delay > 100).sum()),
                "shorter_than_call": int((df.gpu_duration < df.cpu_duration).sum()),
            }
        ]
    )


def one(path: Path) -> dict[str, Any]:
    from hta.trace_analysis import TraceAnalysis

    rank = trace_rank(path)
    out: dict[str, Any] = {"rank": rank}
    try:
        a = TraceAnalysis(
            trace_files={rank: str(path.resolve())},
            trace_dir=str(path.resolve().parent),
            include_last_profiler_step=True,
        )
    except Exception as exc:  # HTA cannot load it: recorded, not fatal
        return {**out, "error": first_line(exc), "stage": "load"}
    for name, call in (
        ("temporal", lambda: a.get_temporal_breakdown(visualize=False)),
        ("kernel_type", lambda: a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)[0]),
        (
            "idle",
            lambda: a.get_idle_time_breakdown(
                ranks=[rank], consecutive_kernel_delay=KERNEL_DELAY, visualize=False
            )[0],
        ),
        ("overlap", lambda: a.get_comm_comp_overlap(visualize=False)),
        (
            "launches",
            lambda: launch_summary(a.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]),
        ),
        ("queue", lambda: a.get_queue_length_summary(ranks=[rank])),
    ):
        try:
            out[name] = records(call())
        except Exception as exc:
            out[name] = {"error": first_line(exc), "where": traceback.extract_tb(exc.__traceback__)[-1].name}
    return out


def main(argv: list[str]) -> int:
    logging.disable(logging.WARNING)
    target = Path(argv[0])
    traces: dict[str, Any] = {}
    result = {"hta": "0.5.0", "kernel_delay": KERNEL_DELAY, "traces": traces}
    for arg in argv[1:]:
        p = Path(arg)
        key = f"{p.parent.name}/{p.name}"
        print(f"hta breakdowns <- {key}", file=sys.stderr, flush=True)
        traces[key] = one(p)
    target.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
