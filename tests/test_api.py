"""The public Python API: the README's example, option validation, the store session."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctda
from ctda.analysis import engine
from ctda.options import AnalysisOptions
from ctda.queries.loader import QueryError
from ctda.store.base import StoreError
from ctda.whatif.select import SelectionError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SMALL = DATA / "hta" / "simple_add_param_benchmark.json.gz"
STEPS = DATA / "hta" / "cpu_only_gloo_rank34_full.json.gz"  # 5 ProfilerSteps, CPU only
MINITOY = DATA / "hta" / "rocm62_mi250_minitoy_train.json.gz"


def readme_example() -> tuple[str, str]:
    """The first python block of the README's "Python API" section and the text after it."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    out = re.search(r"```text\n(.*?)```", section, re.S)
    assert code is not None and out is not None
    return code.group(1), out.group(1)


def test_readme_python_api_example_prints_what_the_readme_shows() -> None:
    code, expected = readme_example()
    assert "ctda.open_store" in code and "store.whatif" in code and "store.compare" in code
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


# --- options -------------------------------------------------------------------------------

BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"cross_thread": "telepathy"}, "unknown cross-thread rule(s) telepathy"),
    ({"cross_thread": ["gil", "telepathy"]}, "unknown cross-thread rule(s) telepathy"),
    ({"cross_thread": 5}, "cross_thread must be"),
    ({"mode": "fast"}, "unknown mode 'fast'; choose from ctda, hta"),
    ({"windows": "step"}, "did you mean 'steps'?"),
    ({"windows": "Traces"}, "did you mean 'trace'?"),
    ({"windows": "(["}, "is not a valid regular expression"),
    ({"windows": ""}, "windows must be"),
    ({"rule_options": {"gil_min_gap": 1}}, "did you mean 'gil_min_gap_ns'?"),
    ({"rule_options": {"gil_min_gap_ns": -5}}, "must be a non-negative integer"),
    ({"window": "steps"}, "unknown option 'window' (did you mean 'windows'?)"),
]
#: the API's functions take the options as typed keywords: a misspelt one is Python's TypeError
MISSPELT = ("window",)


@pytest.mark.parametrize(("kw", "message"), BAD_OPTIONS, ids=[str(k) for k, _ in BAD_OPTIONS])
def test_invalid_options_raise_one_option_error(kw: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ctda.OptionError) as info:
        ctda.validate_options(**kw)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert isinstance(info.value, ctda.CtdaError) and isinstance(info.value, ValueError)
    # analyze checks them before it reads anything: the file does not even exist
    raised, match = (
        (TypeError, "window") if set(kw) & set(MISSPELT) else (ctda.OptionError, re.escape(message))
    )
    with pytest.raises(raised, match=match):
        ctda.analyze(tmp_path / "missing.json", **kw)
    # so does a store, before it opens anything
    with pytest.raises(raised, match=match):
        ctda.open_store(tmp_path / "s.lbug").ingest(SMALL, **kw)
    with pytest.raises(raised, match=match):
        ctda.open_store(tmp_path / "s.lbug").ingest_job([tmp_path], **kw)
    assert not (tmp_path / "s.lbug").exists()


def test_options_normalise_so_one_set_has_one_key() -> None:
    a = AnalysisOptions(cross_thread="gil, fwdbwd")
    b = AnalysisOptions(cross_thread=("fwdbwd", "gil"))
    c = ctda.validate_options(cross_thread=["GIL", "fwdbwd", "gil"])
    assert a == b == c and a.cross_thread == ("fwdbwd", "gil")
    assert a.key() == b.key() == c.key() != AnalysisOptions().key()
    assert AnalysisOptions(cross_thread="none").cross_thread == ()
    assert AnalysisOptions(cross_thread=[]).cross_thread == ()
    assert AnalysisOptions(cross_thread="ALL") == AnalysisOptions()
    assert AnalysisOptions(mode="HTA").mode == "hta"
    assert AnalysisOptions(windows="(step)").windows == "(step)"
    assert AnalysisOptions.from_dict(a.to_dict()) == a
    assert AnalysisOptions.from_dict({}) == AnalysisOptions()
    # a run stored with windows="step" (taken as a regex then) still loads, as it was stored
    assert AnalysisOptions.from_dict({"windows": "step"}).windows == "step"
    with pytest.raises(ctda.OptionError):
        AnalysisOptions(windows="step")
    assert engine.AnalysisOptions is AnalysisOptions and engine.OptionError is ctda.OptionError
    # the keys runs were stored under before the options were normalised: re-ingesting
    # one of those files with the same options must still find it
    from ctda.analysis.tables import options_key

    before_wake = AnalysisOptions(cross_thread=("fwdbwd", "backward_join", "gil", "cuda_lock"))
    assert before_wake.key() == options_key(before_wake) == "407c329ba354b4a1"  # the default then
    # a rule added to the defaults makes a new default key: the analysis it names differs
    assert AnalysisOptions().key() == options_key(AnalysisOptions()) != "407c329ba354b4a1"
    assert options_key(AnalysisOptions(cross_thread=())) == "44f8883ebc492c3b"
    # a mode keys the options it runs: HTA's whatever rules were asked for
    hta = options_key(AnalysisOptions(mode="hta"))
    assert hta == options_key(AnalysisOptions(mode="hta", cross_thread=())) == "959c93c1c4f8a049"


def test_mode_is_case_insensitive_in_the_analysis() -> None:
    table = ctda.read(MINITOY)
    upper = ctda.analyze(table, mode="HTA")
    lower = ctda.analyze(table, mode="hta")
    ours = ctda.analyze(table)
    assert upper.options.mode == "hta"
    assert upper.graph.rule_names == lower.graph.rule_names != ours.graph.rule_names


def test_report_options_are_checked() -> None:
    a = ctda.analyze(STEPS)
    with pytest.raises(ctda.OptionError, match="step must be a ProfilerStep number or 'all', not 'two'"):
        ctda.report(a, step="two")
    steps = r"no ProfilerStep#9 in this trace \(steps: 551, 552, 553, 554, 555\)"
    with pytest.raises(ctda.OptionError, match=steps):
        ctda.report(a, step=9)
    with pytest.raises(ctda.OptionError, match="top must be a positive integer"):
        ctda.report(a, top=0)
    one = ctda.report(a, step=553, top=2)
    assert list(one.steps.step) == [553] and len(one.hotspots) == 2
    assert one.total_ns == int(one.steps.cp_ns.sum()) == int(one.steps.duration_ns.sum())


def test_a_window_regex_that_matches_nothing_names_the_file() -> None:
    with pytest.raises(ctda.CtdaError, match=f"{re.escape(str(SMALL))}: no analysis window matches"):
        ctda.analyze(SMALL, windows="^no such annotation$")


# --- a store ---------------------------------------------------------------------------------


def test_store_session_runs_report_query_rm(tmp_path: Path) -> None:
    a = ctda.analyze(STEPS)
    with ctda.open_store(tmp_path / "s.lbug") as store:
        (first,) = store.ingest([STEPS], run="steps")
        (again,) = store.ingest(STEPS, run="steps")
        assert first.stored and not again.stored and again.run.name == "steps"
        assert [r.name for r in store.runs()] == ["steps"] and first.run.events == 7479
        assert store.report("steps").total_ns == ctda.report(a).total_ns
        assert store.report("steps", step="553").total_ns == ctda.report(a, step=553).total_ns

        rows = store.query("hotspots_by_name", {"run": "steps", "top": 2}).records()
        assert len(rows) == 2 and rows[0]["cp_ns"] >= rows[1]["cp_ns"] > 0
        events = store.query("MATCH (r:Run) WHERE r.name = $n RETURN r.events AS events", {"n": "steps"})
        assert events.records() == [{"events": 7479}]
        with pytest.raises(QueryError, match="--write allows data changes"):
            store.query("MATCH (r:Run) DETACH DELETE r")
        with pytest.raises(StoreError, match="no run 'other'"):
            store.rm("other")
        store.rm("steps")
        assert store.runs() == []
    with pytest.raises(StoreError, match="closed"):
        store.runs()


def test_store_session_whatif_export_compare(tmp_path: Path) -> None:
    with ctda.open_store(tmp_path / "s.lbug") as store:
        # a trace file is analysed on the fly; what needs a stored run says so
        sc = store.whatif(SMALL, scale=["name~cudaFree=0"], name="nofree")
        assert sc.step_times().predicted_ns.sum() < sc.step_times().base_ns.sum()
        with pytest.raises(SelectionError, match="needs a stored run"):
            store.whatif(SMALL, cypher="whatif_copy_3x")
        assert not (tmp_path / "s.lbug").exists()  # nothing was stored

        store.ingest(SMALL, run="simple")
        saved = store.whatif("simple", scale=["name~cudaFree=0"], name="nofree")
        assert [s["name"] for s in store.scenarios("simple")] == ["nofree"]
        assert store.scenarios("simple")[0]["predicted_ns"] == int(saved.step_times().predicted_ns.sum())
        by_query = store.whatif("simple", cypher="whatif_copy_3x", save=False)
        by_scale = store.whatif("simple", scale=["name~^aten::copy_$=0.3333333333333333"], save=False)
        assert (by_query.timing.time == by_scale.timing.time).all()
        assert [s["name"] for s in store.scenarios("simple")] == ["nofree"]
        with pytest.raises(SelectionError, match=r"simple: .*matches no event"):
            store.whatif("simple", scale=["name~^nothing$=0"])

        diff = store.compare("simple", "simple@nofree")
        assert diff.prediction_error["error_ns"] < 0
        assert store.compare("simple", saved).prediction_error == diff.prediction_error
        with pytest.raises(StoreError, match="no scenario 'nope'"):
            store.compare("simple", "simple@nope")
        n = store.export("simple", tmp_path / "nofree.json", scenario="nofree")
        assert n > 0 and ctda.read(tmp_path / "nofree.json").meta.path.endswith("nofree.json")


def test_in_memory_whatif_and_compare() -> None:
    a = ctda.analyze(SMALL)
    sc = ctda.api.whatif(a, scale="name~cudaFree=0")
    assert sc.name == "name~cudaFree=0" and sc.n_changed > 0
    with pytest.raises(SelectionError, match="nothing to change"):
        ctda.api.whatif(a)
    diff = ctda.compare(a, sc)
    assert (diff.a, diff.b) == (str(SMALL), "name~cudaFree=0") and diff.prediction_error["error_ns"] < 0
    assert len(ctda.opportunities(a, top=3)) > 0


def test_public_names_resolve_and_import_ctda_stays_light() -> None:
    for name in ctda.__all__:
        assert getattr(ctda, name) is not None, name
    assert callable(ctda.api.whatif) and ctda.api.open_store is ctda.open_store
    code = "import sys, ctda; print(sorted(m for m in ('numpy', 'pandas', 'ctda.api') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr
