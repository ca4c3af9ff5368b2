"""The cross-step transplant self-check (``ctda validate``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ctda.analysis.engine import analyze
from ctda.analysis.propagate import replay_span
from ctda.cli.app import _register
from ctda.cli.common import app
from ctda.ingest.reader import read_trace
from ctda.whatif.scenario import replay_weights
from ctda.whatif.selfcheck import (
    Gaps,
    _pairs,
    _predict,
    check,
    match_keys,
    own_work,
    step_of_events,
    transplant,
)
from tests.conftest import CORPUS, DATA, SKIP_CORPUS

BARE = DATA / "kineto" / "resnet50_nw0_2020_bare_list.json.gz"


@pytest.fixture(scope="module")
def resnet():  # type: ignore[no-untyped-def]
    return analyze(read_trace(BARE))


def test_self_transplant_is_exact(resnet) -> None:  # type: ignore[no-untyped-def]
    _, wins = step_of_events(resnet)
    assert len(wins) == 6
    for i in range(len(wins)):
        predicted, observed = transplant(resnet, i, i)
        assert predicted == observed


def test_keys_unique_within_a_step(resnet) -> None:  # type: ignore[no-untyped-def]
    step, wins = step_of_events(resnet)
    key = match_keys(resnet, step)
    for s in range(len(wins)):
        k = key[step == s]
        assert len(k) > 1000
        assert len(np.unique(k)) == len(k)
    assert (key[step < 0] == -1).all()


def test_resnet_structure_beats_naive(resnet) -> None:  # type: ignore[no-untyped-def]
    sc = check(resnet)
    assert len(sc) == 30  # every ordered pair of 6 steps
    assert sc.matched > 0.95
    assert sc.median_error < 0.01
    assert sc.median_error < sc.naive_median
    assert "over 30 step pairs" in sc.line()


def test_span_replay_equals_the_full_replay(resnet) -> None:  # type: ignore[no-untyped-def]
    """The self-check replays only the span of the graph a transplant can move: at the
    step's bounds (and every node ordered before them) the times are the full replay's."""
    a = resnet
    step, wins = step_of_events(a)
    key, own = match_keys(a, step), own_work(a)
    gaps = Gaps.of(a, key, step)
    pos = a.graph.position
    assert (a.graph.order[pos] == np.arange(len(pos))).all()
    moved = 0
    for i, j in _pairs(len(wins), 30):
        w, _ = _predict(a, key, step, own, gaps, i, j)
        win = a.windows[wins[i]]
        ends = np.array([win.start_node, win.end_node])
        full = replay_weights(a, w).time
        span = replay_span(a.timing, w, ends)
        before = a.graph.order[: pos[ends].max() + 1]
        assert (span[before] == full[before]).all(), (i, j)
        moved += int((span[before] != a.timing.time[before]).any())
    assert moved == 30  # every transplant moved some node within its span
    # unchanged weights: the observed replay itself, nothing replayed
    assert (replay_span(a.timing, a.calibration.weight, ends) == a.timing.time).all()


def test_single_window_has_no_pairs() -> None:
    a = analyze(read_trace(DATA / "hta" / "cuda_event_sync_tiny.json.gz"))
    sc = check(a)
    assert len(sc) == 0
    assert sc.line() == "self-check: needs at least two steps"


def test_validate_cli(tmp_path: Path) -> None:
    _register()
    res = CliRunner().invoke(app, ["validate", str(BARE), "--format", "json", "--pairs"])
    assert res.exit_code == 0, res.output
    assert '"pairs": 30' in res.output
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    res = CliRunner().invoke(app, ["validate", str(bad)])
    assert res.exit_code == 2
    assert "bad.json" in res.output


@SKIP_CORPUS
@pytest.mark.parametrize(
    "rel, limit",
    [("kineto/resnet50_v100_nw0_2021.json.gz", 0.01), ("hta/ddp_nccl_allreduce_ws2_rank0.json.gz", 0.005)],
)
def test_corpus_single_driver_traces(rel: str, limit: float) -> None:
    assert CORPUS is not None
    a = analyze(read_trace(CORPUS / rel))
    _, wins = step_of_events(a)
    for i in range(len(wins)):
        p, o = transplant(a, i, i)
        assert p == o
    sc = check(a)
    assert sc.median_error < limit
    assert sc.median_error < sc.naive_median


def test_validate_a_stored_run(tmp_path: Path) -> None:
    _register()
    db = str(tmp_path / "store.lbug")
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(BARE), "--run", "r50", "--db", db])
    assert res.exit_code == 0, res.output
    assert "self-check: median" in res.output  # the summary line under the report
    res = runner.invoke(app, ["validate", "r50", "--db", db, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert '"pairs": 30' in res.output
    res = runner.invoke(app, ["validate", "nosuch", "--db", db])
    assert res.exit_code == 2
