"""No import cycles between the modules of ``ctda`` and ``bench``.

The graph is read from the source with :mod:`ast`: an edge ``a -> b`` for every import of
``b`` anywhere in ``a``, at the top, inside a function (a deferred import still ties the
two modules together) or under ``TYPE_CHECKING`` (the types still do). ``from p import x``
points at ``p.x`` when that is a module, else at ``p``. An import of a module's own parent
package is no edge: Python runs a package's ``__init__`` before any of its modules, so it
can never close a cycle at load time, and a package re-exporting its modules is the usual
facade.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ctda", "bench")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if any(p.startswith(".") for p in parts):  # not a module: the bench's venvs in .cache
                continue
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m != name and m not in ancestors}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, successors = work[-1]
            for w in successors:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_the_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_has_the_edges_the_code_has() -> None:
    """Deferred and relative imports count; imports of a parent package do not."""
    graph = import_graph()
    assert "ctda.ingest.reader" in graph["ctda.analysis.snapshot"]  # top-level
    assert "ctda.ingest.limits" in graph["ctda.cli.common"]  # inside a function
    assert len(graph) > 80


#: the HTA analyzer used to sit among the edge rules and import the engine back; once it
#: lives in a package of its own this module is gone and the exemption matches nothing
_OLD_HTA = ["ctda.analysis.engine", "ctda.analysis.rules.hta"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package: str) -> None:
    found = [c for c in cycles(import_graph()) if c[0].split(".")[0] == package and c != _OLD_HTA]
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


# --- one door: the CLI and the UI reach the library only through ctda.api ------------------
#: what a command or a page may import besides ``ctda.api`` (and the ``ctda.api_*`` modules
#: it re-exports): its own layer, the renderers, and the modules of the types the API's
#: results and options are made of, and the decorator of compiled loops (a page draws
#: its timeline with one)
DOOR = ("ctda.api", "ctda.render", "ctda.errors", "ctda.options", "ctda.ingest.table", "ctda.kernels")
#: imports past the door not yet moved behind the API, by importing module. The list may
#: only shrink: a test fails when an entry is no longer needed, so that it is deleted.
PAST_THE_DOOR: dict[str, set[str]] = {
    # --max-trace-bytes parses a size
    "ctda.cli.common": {"ctda.ingest.limits"},
    "ctda.cli.job_store_cmds": {"ctda.job.load"},
    "ctda.cli.ui_cmd": {"ctda.store.config", "ctda.ui.settings"},
    "ctda.cli.whatif_cmds": {"ctda.whatif.blind"},
}


#: the UI's imports past the door, as for the CLI (may only shrink; each needs its reason)
UI_PAST_THE_DOOR: dict[str, set[str]] = {}


def _past_the_door(layer: str, graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out = {}
    for module, deps in graph.items():
        if module == layer or module.startswith(layer + "."):
            past = {
                d
                for d in deps
                if not d.startswith(layer)
                and d != "ctda"
                and not d.startswith("ctda.api_")
                and not any(d == p or d.startswith(p + ".") for p in DOOR)
            }
            if past:
                out[module] = past
    return out


def test_the_door_rule_sees_an_import_past_it() -> None:
    graph = {"ctda.cli.x": {"ctda.api", "ctda.render.job", "ctda.job.run", "ctda.cli.common"}}
    assert _past_the_door("ctda.cli", graph) == {"ctda.cli.x": {"ctda.job.run"}}
    graph = {"ctda.ui.x": {"ctda.api_views", "ctda.apidoc", "ctda.ui.data", "ctda.store.base"}}
    assert _past_the_door("ctda.ui", graph) == {"ctda.ui.x": {"ctda.apidoc", "ctda.store.base"}}


def test_the_cli_imports_only_the_api_renderers_and_result_types() -> None:
    assert _past_the_door("ctda.cli", import_graph()) == PAST_THE_DOOR


def test_the_ui_imports_only_the_api_renderers_and_result_types() -> None:
    assert _past_the_door("ctda.ui", import_graph()) == UI_PAST_THE_DOOR
