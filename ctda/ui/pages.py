"""The pages of ``ctda ui``, in menu order: the one list the app and its tests walk.

Adding a page: a script under ``views/`` with a ``render()`` whose first element is
``st.title(<title>)``, and one :class:`Page` line here. ``tests/test_ui_pages.py`` visits
every page of this list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Page:
    """One page: its script (relative to ``ctda/ui``), menu title and icon, URL path."""

    script: str
    title: str
    icon: str
    url: str

    @property
    def path(self) -> Path:
        return HERE / self.script


PAGES = (
    Page("views/runs.py", "Runs", ":material/storage:", "runs"),
    Page("views/critical_path.py", "Critical path", ":material/timeline:", "critical-path"),
    Page("views/hotspots.py", "Hotspots", ":material/local_fire_department:", "hotspots"),
    Page("views/breakdowns.py", "Breakdowns", ":material/stacked_bar_chart:", "breakdowns"),
    Page("views/job.py", "Job", ":material/lan:", "job"),
    Page("views/whatif.py", "What-if", ":material/tune:", "what-if"),
    Page("views/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    Page("views/console.py", "Cypher console", ":material/terminal:", "console"),
)
