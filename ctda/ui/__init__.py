"""``ctda ui``: a Streamlit app over the store (runs, critical path, hotspots, what-if, compare, Cypher).

Layout: :mod:`ctda.ui.app` is the Streamlit entry script; each page is one script under
:mod:`ctda.ui.views`. What a page shows is computed by plain functions in
:mod:`ctda.ui.frames` (tables) and drawn by :mod:`ctda.ui.canvas`, :mod:`ctda.ui.bars` and
:mod:`ctda.ui.lanes` (Vega-Lite charts on a canvas), which know nothing about Streamlit;
:mod:`ctda.ui.data` is the only place that opens the store and caches analyses between
reruns.
"""
