"""Streamlit entry script of ``ctda ui`` (``streamlit run ctda/ui/app.py -- --db ...``).

It only wires pages together: the sidebar (store and run picker) is drawn here so it is
the same on every page; each page is a script under ``views/``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ctda.ui import widgets

HERE = Path(__file__).parent

PAGES = (
    ("views/runs.py", "Runs", ":material/storage:", "runs"),
    ("views/critical_path.py", "Critical path", ":material/timeline:", "critical-path"),
    ("views/hotspots.py", "Hotspots", ":material/local_fire_department:", "hotspots"),
    ("views/whatif.py", "What-if", ":material/tune:", "what-if"),
    ("views/compare.py", "Compare", ":material/compare_arrows:", "compare"),
    ("views/console.py", "Cypher console", ":material/terminal:", "console"),
)


def main() -> None:
    st.set_page_config(page_title="ctda", page_icon=":material/route:", layout="wide")
    pages = [
        st.Page(str(HERE / path), title=title, icon=icon, url_path=url, default=(k == 0))
        for k, (path, title, icon, url) in enumerate(PAGES)
    ]
    page = st.navigation(pages)
    widgets.sidebar(widgets.settings())
    page.run()


main()
