"""Analysis modes: one registry, and ``--mode hta`` meaning the same in analyze, ingest and the UI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import ctda.cli.analyze_cmd
import ctda.cli.store_cmds
from ctda.analysis import hta, modes, snapshot
from ctda.analysis.engine import AnalysisOptions, OptionError, analyze
from ctda.analysis.tables import rule_docs
from ctda.cli.common import app
from ctda.ingest.reader import read_trace
from ctda.store import open_store
from ctda.store.config import Target
from ctda.store.ingest import ingest

DATA = Path(__file__).parent / "data"
DEMO = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"
US = 1_000
#: HTA's critical path length of the demo trace (HTA's own ``args.critical`` output agrees)
DEMO_HTA_NS = 7_448 * US
SHIPPED = sorted(p for d in ("hta", "kineto") for p in (DATA / d).glob("*.json.gz"))


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.delenv("CTDA_DB", raising=False)
    return CliRunner(env={"COLUMNS": "160", "NO_COLOR": "1"})


def test_registry_names_and_families() -> None:
    assert list(modes.MODES) == ["ctda", "hta"]
    ctda_mode, hta_mode = modes.get("ctda"), modes.get("hta")
    assert ctda_mode.selectable == ("fwdbwd", "backward_join", "gil", "cuda_lock", "wake")
    assert hta_mode.selectable == () and hta_mode.windows == "trace"
    assert [s.name for s in hta_mode.rules(("gil",))] == [
        "hta_operator", "hta_dependency", "hta_launch_delay", "hta_kernel_kernel_delay", "hta_sync_dependency"
    ]  # fmt: skip
    ran = [s.name for s in ctda_mode.rules(("gil", "fwdbwd"))]
    assert ran[:3] == ["duration", "nesting", "thread_sequence"] and ran[-2:] == ["gil", "fwdbwd"]
    assert {s.family for s in ctda_mode.rules(ctda_mode.selectable)} == {"structural", "cross_thread"}


@pytest.mark.parametrize("bad", ["HTA", "Ctda", "", "nope"])
def test_unknown_mode_is_an_option_error(bad: str) -> None:
    """The registry knows modes by their exact names; options take any case of one."""
    with pytest.raises(modes.ModeError, match="choose from ctda, hta"):
        modes.get(bad)
    if bad.lower() in modes.MODES:
        assert AnalysisOptions(mode=bad).mode == bad.lower()
        return
    with pytest.raises(OptionError, match=f"unknown mode {bad!r}"):
        analyze(read_trace(DEMO), AnalysisOptions(mode=bad))


def test_hta_mode_options_are_what_it_runs() -> None:
    """HTA mode runs HTA's rules over the whole trace, whatever windows and cross-thread
    rules were asked for; the analysis records that."""
    a = analyze(read_trace(DEMO), AnalysisOptions(mode="hta", windows="steps"))
    assert a.options.cross_thread == () and a.options.windows == "trace"
    assert [w.label for w in a.windows] == ["trace"]
    assert len(a.contention) == 0
    with pytest.raises(OptionError, match="unknown cross-thread rule"):
        analyze(read_trace(DEMO), AnalysisOptions(mode="hta", cross_thread=("nope",)))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_hta_mode_path_is_htas(path: Path) -> None:
    """An HTA-mode analysis charges exactly the positive-weight edges of HTA's longest path,
    and its window (the critical path) is HTA's length."""
    table = read_trace(path)
    a = analyze(table, AnalysisOptions(mode="hta"))
    r = hta.hta_critical_path(a)
    assert r.length_ns == hta.hta_analysis(table).length_ns
    assert int(a.charges.ns.sum()) == r.length_ns
    starts, ends = a.window_bounds()
    assert int(ends[0] - starts[0]) == r.length_ns
    pe = r.path_edges[r.edges.weight[r.path_edges] > 0]
    want = sorted(zip(r.edges.src[pe].tolist(), r.edges.dst[pe].tolist()))
    e = a.charges.edge.to_numpy()
    assert sorted(zip(a.graph.src[e].tolist(), a.graph.dst[e].tolist())) == want
    # what a stored run keeps (its snapshot) gives the same answer back
    again = snapshot.load(snapshot.dump(a))
    assert int(again.charges.ns.sum()) == r.length_ns
    assert np.array_equal(again.charges.edge.to_numpy(), e)


def test_demo_hta_answer() -> None:
    a = analyze(read_trace(DEMO), AnalysisOptions(mode="hta"))
    assert int(a.charges.ns.sum()) == DEMO_HTA_NS


def test_analyze_and_ingest_report_agree_in_hta_mode(runner: CliRunner, tmp_path: Path) -> None:
    """``analyze --mode hta``, ``ingest --mode hta`` and ``report`` of that run: one answer."""
    db = str(tmp_path / "store.lbug")
    direct = runner.invoke(app, ["analyze", str(DEMO), "--mode", "hta", "--format", "json"])
    assert direct.exit_code == 0, direct.output
    assert json.loads(direct.stdout)["critical_path_length_ns"] == DEMO_HTA_NS

    ing = runner.invoke(app, ["ingest", str(DEMO), "--mode", "hta", "--run", "demo", "--db", db])
    assert ing.exit_code == 0, ing.output
    header = ing.stdout.split("\n\n", 1)[0]
    assert "critical path 7.448 ms over 1 window(s)" in " ".join(header.split())
    assert "cross-thread: none" in header
    for name in ctda.analysis.engine.ALL_CROSS_THREAD:
        assert name not in header

    rep = runner.invoke(app, ["report", "demo", "--format", "json", "--db", db])
    assert rep.exit_code == 0, rep.output
    got = json.loads(rep.stdout)
    assert got["critical_path_ns"] == DEMO_HTA_NS
    assert got["options"]["mode"] == "hta" and got["options"]["cross_thread"] == []
    assert [s["window"] for s in got["steps"]] == ["trace"]

    # ingesting again with the options as typed is recognised as the same run
    again = runner.invoke(app, ["ingest", str(DEMO), "--mode", "hta", "--run", "demo", "--db", db])
    assert again.exit_code == 0 and "already stored" in again.stderr

    upper = runner.invoke(app, ["ingest", str(DEMO), "--mode", "HTA", "--db", db])
    assert upper.exit_code == 0 and "already stored" in upper.stderr  # any case names the mode
    bad = runner.invoke(app, ["ingest", str(DEMO), "--mode", "HTAx", "--db", db])
    assert bad.exit_code == 2 and "unknown mode 'HTAx'" in bad.stderr


def test_stored_hta_run_documents_its_rules(tmp_path: Path) -> None:
    db = Target("ladybug", str(tmp_path / "store.lbug"))
    done = ingest(DEMO, db, AnalysisOptions(mode="hta"), name="demo")
    assert done.analysis is not None
    used = set(done.analysis.graph.rule_names)
    assert {"hta_operator", "hta_dependency", "hta_launch_delay", "release", "terminal"} <= used
    with open_store(db, read_only=True) as store:
        rows = store.query("MATCH (r:Rule) RETURN r.name AS name, r.doc AS doc").records()
    docs = {r["name"]: r["doc"] for r in rows}
    for name in used:
        assert docs.get(name) and docs[name] == rule_docs()[name], name
