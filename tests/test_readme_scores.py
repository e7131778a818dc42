"""The README's "How it scores": its figures in tables a reader scans (quality, build time, encode speed, each
beside its peer), every one of them as the docs give it; prose only for what a table cannot say."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")  # 73.87, 319,073 (dates and ids: not figures)
MAX_PROSE_FIGURES = 8  # a paragraph with more is a table written as prose


def section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split("## How it scores", 1)[1].split("\n## ", 1)[0]


def blocks(text: str) -> list[str]:
    return [block.strip() for block in re.split(r"\n\s*\n", text) if block.strip()]


def figures(text: str) -> list[str]:
    text = re.sub(r"\(\S*?\)|\d{4}-\d\d-\d\d|\b[0-9a-f]{7}\b", " ", text)  # links, dates, commits
    return [f for f in FIGURE.findall(text) if len(f.replace(",", "").replace(".", "")) > 1]


def test_the_figures_are_in_tables_each_with_its_peer() -> None:
    tables = [block for block in blocks(section()) if block.startswith("|")]
    headers = [table.splitlines()[0] for table in tables]
    for kind in ("STS mean", "peer", "sentences/s"):  # quality, build time, encode speed
        table = next((t for t, h in zip(tables, headers, strict=True) if kind in h), None)
        assert table is not None, f"no table of {kind}"
        assert re.search(r"model2vec|sentence-transformers|teacher", table), f"the {kind} table has no peer"
    for block in blocks(section()):
        if not block.startswith("|"):
            assert len(figures(block)) <= MAX_PROSE_FIGURES, block


def test_every_figure_of_the_tables_is_the_docs_own() -> None:
    pages = [*(REPO / "docs").rglob("*.md"), *(REPO / "benchmarks" / "results").rglob("*.md")]
    given = set(FIGURE.findall("\n".join(path.read_text(encoding="utf-8") for path in pages)))
    rows = [line for block in blocks(section()) if block.startswith("|") for line in block.splitlines()]
    missing = {figure for row in rows for figure in figures(row) if figure not in given}
    assert not missing, f"figures the docs do not give: {sorted(missing)}"
