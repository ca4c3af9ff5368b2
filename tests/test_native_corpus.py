"""Every real trace of the shared corpus reads to the same EventTable with either reader.

The native reader declines pieces it cannot read exactly (the Python path reads those),
so the comparison also checks that it did read the corpus itself: a real trace whose
pieces all fell back would compare equal while testing nothing. The Python read uses the
parallel pipeline (forked decode workers), the native one reads in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctda.ingest import native
from ctda.ingest.reader import read_trace
from tests.conftest import CORPUS, NATIVE_SKIP, SKIP_CORPUS, corpus_traces
from tests.test_native_reader import assert_same_tables

#: every real trace: the manifest's, the generated CPU ones and the generated GPU ones
TRACES = corpus_traces() + (sorted((CORPUS / "generated" / "gpu").glob("*.json.gz")) if CORPUS else [])


@SKIP_CORPUS
@pytest.mark.skipif(not native.built(), reason=NATIVE_SKIP)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(CORPUS)) if CORPUS else str(p))
def test_corpus_trace_reads_identically(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setenv(native.READER_ENV, "python")
        expected = read_trace(path)
    before = native.STATS["events"]
    got = read_trace(path, parallel=False)  # in this process, so its native count is seen here
    assert native.enabled()
    assert_same_tables(expected, got)
    # every event was read natively (a piece decoded again after a merge counts twice)
    assert native.STATS["events"] - before >= len(got.events)
