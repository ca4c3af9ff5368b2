"""Where a command's analysis comes from: a trace file, or a run in the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ctda.analysis.engine import Analysis, analyze
from ctda.cli.common import fail, file_progress
from ctda.ingest.reader import read_trace
from ctda.whatif.scenario import Scenario


class StoredRun(Protocol):
    """The slice of a store a what-if needs, bound to one run."""

    def query_rows(self, cypher: str) -> list[dict[str, Any]]: ...


def load_analysis(spec: str, db: str | None) -> tuple[Analysis, Any | None]:
    """A trace file is analysed on the fly; anything else names a stored run."""
    path = Path(spec)
    if path.exists():
        with file_progress(path, "reading") as progress:
            table = read_trace(path, progress)
        return analyze(table), None
    from ctda.store.runs import open_run

    return open_run(spec, db)


def save_scenario(run: Any, sc: Scenario) -> None:
    run.save_scenario(sc)


def load_scenario(run: Any, a: Analysis, name: str) -> Scenario:
    sc = run.load_scenario(a, name)
    if sc is None:
        fail(f"no scenario {name!r} in run {run.name!r}")
    return sc  # type: ignore[no-any-return]
