"""Work run beside the calling thread (``ctda.threads``) and the stages that use it."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest

import ctda.threads
from ctda.analysis.engine import analyze
from ctda.errors import CtdaError
from ctda.ingest.reader import read_trace
from ctda.threads import beside

BENCH_TRACES = Path(__file__).parent.parent / "bench" / "traces"


def test_beside_runs_in_another_thread_and_returns_its_result() -> None:
    main = threading.get_ident()
    got = beside(lambda x, y=0: (threading.get_ident(), x + y), 2, y=3)
    ident, value = got()
    assert value == 5 and ident != main


def test_beside_hands_the_callers_error_back() -> None:
    def fails() -> None:
        raise CtdaError("one line")

    got = beside(fails)
    with pytest.raises(CtdaError, match="one line"):
        got()


def test_on_one_cpu_it_runs_when_asked_in_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctda.threads, "usable_cpus", lambda: 1)
    ran: list[int] = []

    def note() -> int:
        ran.append(threading.get_ident())
        return len(ran)

    got = beside(note)
    assert ran == []  # not started: nothing beside it to overlap with
    assert got() == 1 and ran == [threading.get_ident()]


def test_analysis_equal_with_and_without_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The contention model runs beside the weighing and the path: the analysis is the one
    computed in sequence, field for field."""
    table = read_trace(BENCH_TRACES / "g_loader_oversub_before.pt.trace.json.gz")
    two = analyze(table)
    monkeypatch.setattr(ctda.threads, "usable_cpus", lambda: 1)
    one = analyze(table)
    assert len(one.contention) > 100
    for f in dataclasses.fields(one.contention):
        assert np.array_equal(getattr(one.contention, f.name), getattr(two.contention, f.name)), f.name
    assert np.array_equal(one.timing.time, two.timing.time)
    assert one.charges.equals(two.charges)
