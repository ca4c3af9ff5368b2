"""Shared fixtures: the shipped small traces and, where present, the shared real corpus."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
DATA = HERE / "data"


def _corpus_dir() -> Path | None:
    """The shared trace corpus: $CTDA_TRACE_CORPUS, else ../shared/traces beside the repo."""
    env = os.environ.get("CTDA_TRACE_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(HERE.parent.parent / "shared" / "traces")
    for c in candidates:
        if (c / "MANIFEST.tsv").is_file():
            return c
    return None


CORPUS = _corpus_dir()
SKIP_CORPUS = pytest.mark.skipif(
    CORPUS is None,
    reason="shared trace corpus not found (set CTDA_TRACE_CORPUS or place it at ../shared/traces)",
)


def manifest_rows() -> list[dict[str, str]]:
    """Rows of MANIFEST.tsv (empty when the corpus is absent)."""
    if CORPUS is None:
        return []
    with (CORPUS / "MANIFEST.tsv").open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def corpus_traces() -> list[Path]:
    """Every real trace in the corpus: MANIFEST rows plus the generated CPU traces."""
    if CORPUS is None:
        return []
    paths = [CORPUS / r["path"] for r in manifest_rows()]
    paths += sorted((CORPUS / "generated").glob("*.json.gz"))
    return paths


def axis_labels(axis: dict[str, Any]) -> list[str]:
    """The labels a canvas timeline's row axis shows, in the order of its ``values``: its
    label expression maps each value to a label (``datum.value === v ? "label" : ...``)."""
    found = re.findall(r'datum\.value === ([-0-9.e]+) \? ("(?:[^"\\]|\\.)*")', axis["labelExpr"])
    labels = {float(v): json.loads(text) for v, text in found}
    return [labels[float(v)] for v in axis["values"]]
