"""UI pages from other packages: an installed distribution's entry point (group
``ctda.pages``) adds a page to the menu, after the built-ins, and the app shows it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from streamlit.testing.v1 import AppTest

from ctda.ui import pages
from tests.plugin_dist import installed

APP = Path(__file__).resolve().parents[1] / "ctda" / "ui" / "app.py"

PLUGIN = """
from pathlib import Path

from ctda.ui.pages import Page

HERE = Path(__file__).parent
PAGE = Page(str(HERE / "extra_page.py"), "Extra", ":material/extension:", "extra")
TAKEN = Page(str(HERE / "extra_page.py"), "Impostor", ":material/extension:", "runs")
"""
SCRIPT = """
import streamlit as st

st.title("Extra")
st.write("a page from another package")
"""


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "extra_page.py").write_text(SCRIPT)
    entries = (
        "extra = ctda_page_plugin:PAGE\ntaken = ctda_page_plugin:TAKEN\nbroken = ctda_page_plugin:NOPE\n"
        # the built-ins, as ctda's own metadata declares them: listed once all the same
        "again = ctda.ui.pages:BUILTIN\n"
    )
    pages.discover.cache_clear()
    try:
        with installed(tmp_path, "ctda_page_plugin", PLUGIN, "ctda.pages", entries):
            yield tmp_path
    finally:
        pages.discover.cache_clear()


def test_an_installed_page_joins_the_menu(plugin: Path) -> None:
    found, problems = pages.discover()
    (extra,) = [p for p in found if p.url == "extra"]
    assert found == (*pages.BUILTIN, extra)
    assert extra.title == "Extra" and extra.path == plugin / "extra_page.py"
    # a page may not take a built-in's URL, and an entry point naming nothing is reported
    assert [p.title for p in found if p.url == "runs"] == ["Runs"]
    assert len(problems) == 2, problems
    assert any("'runs' is taken by 'Runs'" in line for line in problems)
    assert any(line.startswith("page plugin 'broken'") for line in problems)


def test_the_app_shows_an_installed_page(
    plugin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTDA_DB", str(tmp_path / "empty.lbug"))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    # the problems are told in the sidebar, the page itself opens like any other
    assert sum("page plugin 'broken'" in w.value for w in at.sidebar.warning) == 1
    at.switch_page(str(plugin / "extra_page.py")).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == "Extra"
