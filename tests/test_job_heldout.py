"""The held-out recorded jobs (``bench/traces/multirank_heldout.tar.xz``, README in
``bench/traces/multirank``): shapes and sizes the d_ pairs do not have, recorded after the
job analysis was built. Stragglers are named as on the d_ set; the job what-ifs miss by more
(docs/jobs.md#held-out-jobs), and these figures guard against their getting worse."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ARCHIVE = Path(__file__).parent.parent / "bench" / "traces" / "multirank_heldout.tar.xz"

pytestmark = pytest.mark.slow  # thirty jobs analysed: about a minute and a half


@pytest.fixture(scope="module")
def heldout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from ctda.job.run import analyze_job

    root = tmp_path_factory.mktemp("heldout")
    with tarfile.open(ARCHIVE, "r:xz") as tar:
        tar.extractall(root, filter="data")
    return {d.name: analyze_job([d], executor="serial") for d in sorted(root.iterdir()) if d.is_dir()}


def test_the_archive_holds_both_sets(heldout: dict[str, Any]) -> None:
    assert sum(n.startswith("e_") for n in heldout) == 21 and sum(n.startswith("f_") for n in heldout) == 9


def test_stragglers_named_and_balanced_jobs_none(heldout: dict[str, Any]) -> None:
    """Every injected straggler is named in every step (but two of f_ws4_compute15_r2's 20,
    where its 15 ms loop on four ranks is within the job's noise) and no other rank ever is;
    a balanced job names none."""
    for name, job in heldout.items():
        st = job.stragglers
        if "balanced" in name:
            assert (st.straggler == -1).all(), (name, st.verdict.tolist())
            continue
        want = int(name.rsplit("_r", 1)[1])
        assert set(st.straggler.tolist()) <= {want, -1}, name
        named = int((st.straggler == want).sum())
        assert named == (18 if name == "f_ws4_compute15_r2" else 20), (name, named)


def _misses(heldout: dict[str, Any], prefix: str) -> dict[str, float]:
    from ctda.job.whatif import job_scenario

    jobs = {n: j for n, j in heldout.items() if n.startswith(prefix)}
    out = {}
    for name, job in jobs.items():
        if "balanced" in name:
            continue
        ws = name.split("_")[1]
        obs = np.mean([j.steps.job_step_ns.mean() for n, j in jobs.items() if f"{ws}_balanced" in n])
        out[name] = job_scenario(job, median_straggler=True).mean_predicted_ns / obs - 1
    return out


def test_job_whatif_misses_as_measured(heldout: dict[str, Any]) -> None:
    """``--straggler-median`` against the mean of the same set's balanced jobs of the world
    size: mean miss 12.0 % on the e_ set (4 of 14 within 5 %), 12.2 % on the f_ set (1 of 6),
    against 5.5 % on the d_ set. Not the issue's 5 %: a known miss, kept from growing."""
    e, f = _misses(heldout, "e_"), _misses(heldout, "f_")
    assert len(e) == 14 and len(f) == 6
    assert np.mean(np.abs(list(e.values()))) < 0.13, e
    assert np.mean(np.abs(list(f.values()))) < 0.13, f
    assert sum(abs(x) < 0.05 for x in e.values()) >= 4, e
