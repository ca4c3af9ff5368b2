"""The pages of ``ctda ui``, in menu order: the one registry the app and its tests walk.

The built-in pages are listed here, in code; other packages add theirs through the entry
point group ``ctda.pages``, whose entry point names a :class:`Page` (or a sequence of them)
whose ``script`` is an absolute path to a Streamlit script of that package. They follow the
built-ins in the menu, in entry point order. Adding a built-in page: a script under
``views/`` with a ``render()`` whose first element is ``st.title(<title>)``, and one
:class:`Page` line in :data:`BUILTIN`. ``tests/test_ui_pages.py`` visits every page of
:func:`registry`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

HERE = Path(__file__).parent
GROUP = "ctda.pages"


@dataclass(frozen=True)
class Page:
    """One page: its script (relative to ``ctda/ui``, or absolute), menu title and icon,
    URL path (unique among the pages)."""

    script: str
    title: str
    icon: str
    url: str

    @property
    def path(self) -> Path:
        return HERE / self.script  # an absolute script stays as it is


BUILTIN = (
    Page("views/runs.py", "Runs", ":material/storage:", "runs"),
    Page("views/critical_path.py", "Critical path", ":material/timeline:", "critical-path"),
    Page("views/hotspots.py", "Hotspots", ":material/local_fire_department:", "hotspots"),
    Page("views/breakdowns.py", "Breakdowns", ":material/stacked_bar_chart:", "breakdowns"),
    Page("views/job.py", "Job", ":material/lan:", "job"),
    Page("views/whatif.py", "What-if", ":material/tune:", "what-if"),
    Page("views/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    Page("views/console.py", "Cypher console", ":material/terminal:", "console"),
)


def _plugins() -> tuple[list[Page], list[str]]:
    """The pages the entry points of :data:`GROUP` name, and one line per entry point that
    does not load or names something else (a broken plugin must not take the UI down)."""
    pages: list[Page] = []
    problems: list[str] = []
    for ep in entry_points(group=GROUP):
        try:
            obj = ep.load()
        except Exception as exc:
            problems.append(f"page plugin {ep.name!r} ({ep.value}) failed to load: {exc}")
            continue
        found = [obj] if isinstance(obj, Page) else list(obj) if isinstance(obj, (list, tuple)) else []
        if not found or not all(isinstance(p, Page) for p in found):
            problems.append(f"page plugin {ep.name!r} ({ep.value}) names no Page")
            continue
        pages += found
    return pages, problems


@functools.cache
def discover() -> tuple[tuple[Page, ...], tuple[str, ...]]:
    """Every page, built-ins first (see the module's docstring), and the problems met on
    the way. A page whose URL path is taken already, or whose script is missing, is left
    out with a line saying so; the same page declared twice is listed once. Read once per
    process (the app asks on every rerun); ``discover.cache_clear()`` reads again."""
    out = list(BUILTIN)
    plugins, problems = _plugins()
    for p in plugins:
        taken = next((q for q in out if q.url == p.url), None)
        if taken == p:
            continue  # the built-ins, declared again in the package's own metadata
        if taken is not None:
            problems.append(f"page {p.title!r}: the URL path {p.url!r} is taken by {taken.title!r}")
        elif not p.path.is_file():
            problems.append(f"page {p.title!r}: no script at {p.path}")
        else:
            out.append(p)
    return tuple(out), tuple(problems)


def registry() -> tuple[Page, ...]:
    """Every page, in menu order."""
    return discover()[0]
