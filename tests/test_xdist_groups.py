"""``make test`` and ``make test-all`` rely on ``--dist loadgroup`` keeping a module's tests on
one worker when they share a module-scoped fixture (computed once) and every Neo4j test on one worker (one
server). When the group marks stopped reaching the scheduler nothing failed: the suite just
ran each module's fixtures, and a Neo4j server, once per worker. This runs a tiny suite under
the same options and checks where each test ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULE = """
import json, os
from pathlib import Path

import pytest

@pytest.fixture(scope="module")
def shared():  # computed once per worker that runs one of the module's tests
    return 1

def _record(name):
    out = Path(os.environ["GROUPS_OUT"]) / (name + ".json")
    out.write_text(json.dumps(os.environ["PYTEST_XDIST_WORKER"]))

def test_1(shared): _record(__name__ + "_1")
def test_2(shared): _record(__name__ + "_2")
def test_3(shared): _record(__name__ + "_3")
"""
#: a module whose tests share nothing: no group, its tests go wherever a worker is idle
FREE = """
def test_free_1(): pass
def test_free_2(): pass
"""


def test_loadgroup_keeps_a_module_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    # the project's conftest as a plugin: its marks and its id fix-up are what is tested
    (suite / "conftest.py").write_text("pytest_plugins = ['tests.conftest']\n")
    for name in ("test_a", "test_b"):
        (suite / f"{name}.py").write_text(MODULE)
    (suite / "test_free.py").write_text(FREE)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, GROUPS_OUT=str(out), PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    res = subprocess.run([*cmd, "-v", str(suite)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    # the scheduler saw the groups: every id carries its module's group
    assert res.stdout.count("PASSED") == 8
    assert "test_a.py::test_1@" in res.stdout, res.stdout
    assert "test_free.py::test_free_1 " in res.stdout and "test_free_1@" not in res.stdout, res.stdout
    ran = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert len(ran) == 6
    for module in ("test_a", "test_b"):
        # ungrouped, the first two tests go to different workers (one unit each, round robin)
        assert len({w for name, w in ran.items() if name.startswith(module)}) == 1, ran
