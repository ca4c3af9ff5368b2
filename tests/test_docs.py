"""The docs the code cites exist: every ``docs/NAME.md#anchor`` names a file and one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CITATION = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", doc.read_text(), re.MULTILINE)}


def citations() -> list[tuple[Path, str, str | None]]:
    tests = [p for p in ROOT.glob("tests/**/*.py") if p.name != Path(__file__).name]
    sources = [*ROOT.glob("ctda/**/*.py"), *ROOT.glob("bench/*.py"), *tests]
    sources += [ROOT / "README.md", *ROOT.glob("docs/*.md")]
    return [(p, m.group(1), m.group(2)) for p in sources for m in CITATION.finditer(p.read_text())]


def test_slug_follows_github() -> None:
    assert slug("Replay-calibrated weights") == "replay-calibrated-weights"
    assert slug("Nodes: two time points per event") == "nodes-two-time-points-per-event"


def test_cited_docs_and_anchors_exist() -> None:
    cited = citations()
    assert any(anchor == "replay-calibrated-weights" for _, _, anchor in cited)
    for source, name, anchor in cited:
        doc = ROOT / "docs" / name
        assert doc.is_file(), f"{source.relative_to(ROOT)} cites missing docs/{name}"
        if anchor:
            assert anchor in anchors(doc), (
                f"{source.relative_to(ROOT)} cites docs/{name}#{anchor}: no such heading"
            )


def test_the_model_page_links_its_own_sections() -> None:
    doc = ROOT / "docs" / "model.md"
    links = set(re.findall(r"\]\(#([\w-]+)\)", doc.read_text()))
    assert links and links <= anchors(doc)
