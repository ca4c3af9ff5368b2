"""Streamlit entry script of ``ctda ui`` (``streamlit run ctda/ui/app.py -- --db ...``).

It only wires pages together: the sidebar (store and run picker) is drawn here so it is
the same on every page; each page is a script under ``views/``, listed in
:mod:`ctda.ui.pages`.
"""

from __future__ import annotations

import streamlit as st

from ctda.ui import widgets
from ctda.ui.pages import PAGES


def main() -> None:
    st.set_page_config(page_title="ctda", page_icon=":material/route:", layout="wide")
    pages = [
        st.Page(str(p.path), title=p.title, icon=p.icon, url_path=p.url, default=(k == 0))
        for k, p in enumerate(PAGES)
    ]
    page = st.navigation(pages)
    widgets.sidebar(widgets.settings())
    page.run()


main()
