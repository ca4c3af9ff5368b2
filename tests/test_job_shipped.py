"""Multi-rank jobs on the job shipped with the tests (no shared corpus needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def test_two_ranks_on_two_cores_compute_straggler_keeps_its_lateness() -> None:
    """Recorded for these tests (tests/data): 2 ranks on 2 cores, rank 1 computes 30 ms more.
    Rank 0's ops still stall beside the loop (10-21 ms a step are charged to it), but rank 0
    arrives early anyway, so no lateness moves: the straggler is the latest to arrive with
    its measured lateness, the injected loop its top item."""
    from ctda.job.run import analyze_job

    d = Path(__file__).parent / "data" / "multirank" / "g_ddp_ws2_compute30_r1"
    job = analyze_job([d], executor="serial")
    assert job.full().replay_exact()
    cp = job.paths.groupby("label").ns.sum()
    assert (cp.reindex(job.steps.label).to_numpy() == job.steps.job_step_ns.to_numpy()).all()
    ms = np.array(json.loads((d / "steps.json").read_text())["job_step_ms"])
    assert np.abs(job.steps.rank_step_ns.to_numpy() / 1e6 - ms).max() < 0.5  # the per-rank view
    st = job.stragglers
    assert list(st.straggler) == [1] * 5 and list(st["last"]) == [1] * 5
    assert list(st.late_ns) == [late[1] for late in st.late_by_rank]  # nothing moved
    assert (st.late_ns > 20e6).all()
    for items in st.top_items:
        assert items[0][1].endswith("busy_loop") and items[0][2] > 30e6
    host = job.host
    assert host is not None
    extra = host.extra
    assert set(extra["rank"]) == {1} and extra.top_name.str.endswith("busy_loop").all()
    charged = host.slowed.groupby("label").charged_ns.sum()
    assert set(host.slowed["rank"]) == {0} and charged.min() > 10e6 and charged.max() < 22e6
