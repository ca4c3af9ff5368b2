"""Streamlit entry script of ``ctda ui`` (``streamlit run ctda/ui/app.py -- --db ...``).

It only wires pages together: the sidebar (store and run picker) is drawn here so it is
the same on every page; each page is a script (ours under ``views/``), listed by the
registry of :mod:`ctda.ui.pages`.
"""

from __future__ import annotations

import streamlit as st

from ctda.ui import share, widgets
from ctda.ui.pages import discover

#: the tab icon, inline: a ``:material/...:`` page icon makes the browser fetch an SVG
#: from a font CDN, which fails offline (the sidebar's icons come from a bundled font)
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
    '<rect width="24" height="24" rx="5" fill="#1B1B1B"/>'
    '<path d="M4 17h5l3-10h3l2 5h3" fill="none" stroke="#F58518" stroke-width="2.4" '
    'stroke-linecap="round" stroke-linejoin="round"/></svg>'
)


def main() -> None:
    st.set_page_config(page_title="ctda", page_icon=FAVICON, layout="wide")
    found, problems = discover()
    pages = [
        st.Page(str(p.path), title=p.title, icon=p.icon, url_path=p.url, default=(k == 0))
        for k, p in enumerate(found)
    ]
    page = st.navigation(pages)
    share.read_once()  # a shared link's run, step and scenario, before anything is drawn
    widgets.sidebar(widgets.settings())
    for line in problems:
        st.sidebar.warning(line)
    try:
        page.run()
    finally:
        share.publish()  # the URL names what this rerun drew (st.stop included): a link to send


main()
