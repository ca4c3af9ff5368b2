"""The document of the cross-step self-check (``ctda validate``)."""

from __future__ import annotations

from rich.text import Text

from ctda.render.output import Block, Col, Document, Section
from ctda.whatif.selfcheck import SelfCheck

PAIR_COLS = [
    Col("i", "step i"),
    Col("j", "step j"),
    Col("base_ns", "i ms", "ms"),
    Col("observed_ns", "j ms", "ms"),
    Col("predicted_ns", "predicted ms", "ms"),
    Col("error", "error", "pct"),
    Col("naive_error", "naive", "pct"),
    Col("matched", "matched", "pct"),
]


def validate_doc(sc: SelfCheck, label: str, pairs: bool) -> Document:
    """The one-line summary; with ``pairs``, every step pair's prediction and the naive guess."""
    blocks: list[Block] = [Text(sc.line())]
    if pairs and len(sc):
        blocks.append(Section.of("pairs", "Step pairs", sc.pairs, PAIR_COLS))
    data = {"summary": sc.summary(), "pairs": sc.pairs.to_dict(orient="records") if pairs else None}
    return Document(f"Self-check of {label}", blocks, data=data, source=label)
