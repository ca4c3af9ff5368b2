"""The document of the cross-step self-check (``ctda validate``)."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from ctda.render.output import Block, Col, Document, Section
from ctda.whatif.selfcheck import FloorCheck, SelfCheck

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


FLOOR_COLS = [
    Col("scenario", "scenario"),
    Col("label", "window"),
    Col("predicted_ns", "predicted ms", "ms"),
    Col("floor_ns", "device work ms", "ms"),
    Col("short_ns", "short by ms", "ms"),
]


def validate_doc(sc: SelfCheck, label: str, pairs: bool, floor: FloorCheck | None = None) -> Document:
    """The one-line summary; with ``pairs``, every step pair's prediction and the naive guess;
    with ``floor``, the device-work floor's line and any window that breaks it."""
    blocks: list[Block] = [Text(sc.line())]
    if floor is not None:
        blocks.append(Text(floor.line()))
        if not floor.ok:
            blocks.append(
                Section.of("floor", "Windows shorter than their device work", floor.violations, FLOOR_COLS)
            )
    if pairs and len(sc):
        blocks.append(Section.of("pairs", "Step pairs", sc.pairs, PAIR_COLS))
    data: dict[str, Any] = {
        "summary": sc.summary(),
        "pairs": sc.pairs.to_dict(orient="records") if pairs else None,
    }
    if floor is not None:
        data["floor"] = {**floor.summary(), "violations": floor.violations.to_dict(orient="records")}
    return Document(f"Self-check of {label}", blocks, data=data, source=label)
