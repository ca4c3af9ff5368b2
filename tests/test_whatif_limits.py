"""Bounded what-if factors (issue 29): a factor out of range ends in one line and exit 2
from every entry point (the CLI's ``--scale``, a job's, a stored scenario, a Cypher
selection, the database's ``ctda.replay``), the largest allowed factor predicts a larger
finite step, and scaled durations past ctda's time range are an error, never a wrap.

The other input limits are in ``test_input_limits.py``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from ctda.ingest.reader import read_trace
from ctda.store.runs import _override_from
from ctda.whatif.select import MAX_FACTOR, SelectionError, check_factor
from tests.input_limits_helpers import DEMO, JOB, SMALL, cli, event, one_line
from tests.neo4j_fixture import neo4j_server  # noqa: F401  (the Java procedure's test)


def _trace(path: Path, events: list[dict[str, Any]], **meta: Any) -> Path:
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, **meta}).encode()
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


# --- what-if factors -------------------------------------------------------------------------


@pytest.mark.parametrize("factor", ["1e15", "1e300", "-1", "1000001", "nan", "inf"])
def test_scale_factors_out_of_range_are_one_line(tmp_path: Path, factor: str) -> None:
    db = tmp_path / "s.lbug"
    line = one_line(
        cli("whatif", str(DEMO), "--scale", f"name~hipLaunchKernel={factor}", "--dry-run", "--db", str(db))
    )
    assert factor in line
    assert not db.exists()


def test_the_largest_factor_predicts_a_larger_finite_step(tmp_path: Path) -> None:
    scale = f"name~hipLaunchKernel={MAX_FACTOR:g}"
    res = cli(
        "whatif", str(DEMO), "--scale", scale, "--dry-run", "--format", "json", "--db", str(tmp_path / "s")
    )
    assert res.exit_code == 0, res.output
    steps = json.loads(res.stdout)["steps"]
    first = steps[0]
    # 12 launches of 6.626 ms in all, a million times longer: about 6.6e6 ms, never negative
    assert 6.0e12 < first["predicted_ns"] < 7.0e12 and first["predicted_ns"] > first["base_ns"]


def test_scaled_durations_saturate_with_an_error_never_wrap(tmp_path: Path) -> None:
    """A two-hour op scaled by the largest factor would pass 2^62 ns: an error, not a wrap."""
    hour_us = 3.6e9
    trace = _trace(
        tmp_path / "long.json",
        [
            {**event("ProfilerStep#1", ts=0, dur=2 * hour_us), "cat": "user_annotation"},
            event("aten::long", ts=10, dur=2 * hour_us - 20),
        ],
    )
    db = tmp_path / "s.lbug"
    line = one_line(cli("whatif", str(trace), "--scale", "name~long=1e6", "--dry-run", "--db", str(db)))
    assert "past the time range ctda computes with" in line
    res = cli(
        "whatif", str(trace), "--scale", "name~long=1000", "--dry-run", "--format", "json", "--db", str(db)
    )
    assert res.exit_code == 0, res.output
    (step,) = json.loads(res.stdout)["steps"]
    assert step["predicted_ns"] == pytest.approx((2 * hour_us - 20) * 1e6, rel=1e-6)


def test_every_entry_point_of_a_factor_is_checked() -> None:
    from ctda.analysis.engine import analyze
    from ctda.whatif.select import from_rows

    assert check_factor("0", "x") == 0.0 and check_factor(2, "x") == 2.0
    for bad in (float("nan"), float("inf"), -0.5, 1e7, "abc", None):
        with pytest.raises(SelectionError):
            check_factor(bad, "x")
    # a stored scenario (e.g. edited in the database) is checked when it is loaded
    with pytest.raises(SelectionError, match="tampered"):
        _override_from({"label": "tampered", "events": [0], "factor": 1e300})
    with pytest.raises(SelectionError, match="durations"):
        _override_from({"label": "tampered", "events": [0], "factor": None, "dur_ns": [-5]})
    # Cypher selections (CLI --cypher, API, the UI's query groups): factors and durations
    a = analyze(read_trace(SMALL, parallel=False))
    for row, problem in (
        ({"uid": 0, "factor": 1e300}, "must be a finite number"),
        ({"uid": 0, "factor": "fast"}, "not a number"),
        ({"uid": 0, "dur": -3.0}, "dur -3.0"),
        ({"uid": 0, "dur": float("inf")}, "dur inf"),
        ({"uid": "x", "factor": 0.5}, "not an event uid"),
    ):
        with pytest.raises(SelectionError, match=problem):
            from_rows(a, [row], "q")


def test_job_whatif_factor_is_checked(tmp_path: Path) -> None:
    line = one_line(cli("whatif-job", str(JOB), "--scale", "rank=0=1e15", "--executor", "serial"))
    assert "1e15" in line and "from 0 to 1e6" in line


# --- the database's ctda.replay: the same bounds, on a real Neo4j server ---------------------


@pytest.mark.neo4j
def test_replay_procedure_bounds_factors(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``ctda.replay`` with 1e18 returned int64's maximum and a negative end: now the factor
    and the scaled total are checked as in Python, each a clear error."""
    from ctda.analysis.engine import AnalysisOptions
    from ctda.store import StoreError, open_store
    from ctda.store.ingest import ingest
    from tests.test_store_suite import neo4j_target

    info = request.getfixturevalue("neo4j_server")
    t = neo4j_target(info)
    hour_us = 3.6e9
    trace = _trace(
        tmp_path / "long.json",
        [
            {**event("ProfilerStep#1", ts=0, dur=2 * hour_us), "cat": "user_annotation"},
            event("aten::long", ts=10, dur=2 * hour_us - 20),
        ],
    )
    done = ingest(trace, t, AnalysisOptions(), name="limits_long_op", force=True)
    rid = done.run.id
    with open_store(t, read_only=True) as s:
        (row,) = s.query(
            "MATCH (e:Event) WHERE e.run_id = $r AND e.name = 'aten::long' RETURN e.idx AS idx", {"r": rid}
        ).records()
        idx = str(row["idx"])
        ok = s.query(
            "CALL ctda.replay($r, $f) YIELD predictedNs RETURN predictedNs", {"r": rid, "f": {idx: 1000.0}}
        )
        assert ok.records()[0]["predictedNs"] == pytest.approx((2 * hour_us - 20) * 1e6, rel=1e-6)
        for factor, problem in (
            (1e18, "must be a finite number from 0 to 1e6"),
            (1e6, "past the time range"),
        ):
            with pytest.raises(StoreError, match=problem):
                s.query("CALL ctda.replay($r, $f)", {"r": rid, "f": {idx: factor}}).records()
    # a factor stored on the event itself (any writer can set one) is checked the same way
    with open_store(t) as s:
        s.query("MATCH (e:Event) WHERE e.run_id = $r SET e.limits_hostile = 1e18", {"r": rid}, write=True)
    with open_store(t, read_only=True) as s, pytest.raises(StoreError, match="must be a finite number"):
        s.query("CALL ctda.replay($r, {}, {property: 'limits_hostile'})", {"r": rid}).records()
    # the CLI's --in-db path: one line, as without --in-db
    auth = {"CTDA_NEO4J_USER": info.user, "CTDA_NEO4J_PASSWORD": info.password}
    line = one_line(
        cli("whatif", "limits_long_op", "--scale", "name~long=1e6", "--in-db", "--db", info.uri, env=auth)
    )
    assert "past the time range" in line
