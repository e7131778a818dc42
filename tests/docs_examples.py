"""The code blocks of the docs (README.md, docs/, the files they include) and the folder they run in.

A fenced block whose language is ``python`` or ``bash`` is an example and runs; a skip marker right above it,
``<!-- docs-test: skip: REASON -->``, keeps it from running and says why (docs/development.md).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from fakes import write_corpus, write_eval_data, write_multilingual_data, write_rows

REPO = Path(__file__).resolve().parent.parent
RUN = ("python", "bash")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->$")
SKIP = re.compile(r"^skip:\s*(.*)$")
INCLUDE = re.compile(r'^--8<--\s+"([^"]+)"\s*$')
FENCE = re.compile(r"^(`{3,})(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and code, and why it is skipped (``None``: it runs)."""

    page: str
    line: int
    language: str
    code: str
    skip: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}:{self.language}"


def pages() -> list[Path]:
    """README.md, every docs page, and the files the pages include (pymdownx.snippets), each once."""
    found = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in list(found):
        for line in page.read_text(encoding="utf-8").splitlines():
            match = INCLUDE.match(line.strip())
            if match and (REPO / match.group(1)) not in found:
                found.append(REPO / match.group(1))
    return found


def blocks(page: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of ``page``, and what is wrong with its markers and fences (one line each)."""
    name = str(page.relative_to(REPO))
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    problems: list[str] = []
    marker: tuple[int, str] | None = None  # (line, text) of a marker still waiting for its block
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        fence = FENCE.match(line)
        if fence:
            ticks, language = fence.group(1), fence.group(2).strip().split(" ")[0]
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
            if end is None:
                problems.append(f"{name}:{i + 1}: a fence that is never closed")
                break
            skip = None
            if marker is not None:
                skip = _reason(marker[1])
                if skip is None:
                    problems.append(f"{name}:{marker[0]}: a skip marker needs its reason: {marker[1]!r}")
                marker = None
            if not language:
                problems.append(f"{name}:{i + 1}: a fenced block without a language")
            found.append(Block(name, i + 1, language, "\n".join(lines[i + 1 : end]) + "\n", skip))
            i = end + 1
            continue
        match = MARKER.match(line)
        if match:
            if marker is not None:
                problems.append(f"{name}:{marker[0]}: a marker before no code block")
            marker = (i + 1, match.group(1))
        elif line and marker is not None:
            problems.append(f"{name}:{marker[0]}: a marker before no code block")
            marker = None
        i += 1
    if marker is not None:
        problems.append(f"{name}:{marker[0]}: a marker before no code block")
    return found, problems


def _reason(marker: str) -> str | None:
    """The reason of a ``skip: REASON`` marker; ``None`` when it gives none (or is not a skip)."""
    match = SKIP.match(marker)
    return match.group(1).strip() or None if match else None


# What the examples read: short texts in the words of the demo model's vocabulary.
TEXTS = [
    "A cat sleeps.",
    "A kitten naps.",
    "Stocks fell sharply today.",
    "The king and the queen rode to Paris.",
    "A man is playing a guitar.",
    "Vaccines train the immune system.",
]
DOCUMENTS = [
    "Vaccines train the immune system to fight a virus.",
    "How do vaccines work in the body?",
    "The immune system protects the body from disease.",
    "A cat sleeps on the warm sofa.",
    "The kitten naps in the sun.",
    "Stocks fell sharply as markets opened.",
    "The bank raised its interest rate.",
    "A man is playing a guitar on the street.",
    "The band played a new song.",
    "The king and the queen rode to Paris.",
    "Rain fell on the river and the lake.",
    "A boat sails on the water.",
]
REVIEWS = {
    "positive": ["a gripping, funny film", "a warm and clever story", "great acting and a fine plot",
                 "a funny and moving film", "a clever, warm film", "fine acting and a great story"],
    "negative": ["a dull, tired plot", "a boring and silly film", "bad acting and a weak story",
                 "a silly, dull story", "a weak and boring plot", "tired acting and a bad film"],
}  # fmt: skip
EXTRA_WORDS = [
    "king",
    "queen",
    "man",
    "woman",
    "paris",
    "france",
    "coffee",
    "happy",
    "sofa",
    "couch",
    "guitar",
]


def vocabulary() -> list[str]:
    """Every word of the sandbox's texts (and of the fake corpus), most of them in several texts."""
    from fakes import COMMON, TOPICS

    texts = TEXTS + DOCUMENTS + [t for group in REVIEWS.values() for t in group]
    words = {w for t in texts for w in re.findall(r"[a-z]+", t.lower())}
    words |= set(EXTRA_WORDS) | set(COMMON) | {w for topic in TOPICS for w in topic}
    return sorted(words)


def write_sandbox(root: Path, model: Path) -> Path:
    """The folder each page starts from: ``models/demo`` (a copy of ``model``) and the files examples name."""
    shutil.copytree(model, root / "models" / "demo")
    write_rows(root / "texts.txt", TEXTS)
    documents = [
        {"id": f"doc-{i}", "text": text, "lang": "en" if i % 3 else "de"}
        for i, text in enumerate(DOCUMENTS * 2, start=1)
    ]
    write_rows(root / "docs.jsonl", [json.dumps(d) for d in documents])
    write_rows(root / "docs" / "part-1.jsonl", [json.dumps(d) for d in documents[:12]])
    write_rows(root / "docs" / "part-2.jsonl", [json.dumps(d) for d in documents[12:]])
    _write_parquet(root / "docs" / "part-3.parquet", documents)
    write_rows(root / "more.csv", ["key,body"] + [f"m{i},{text}" for i, text in enumerate(TEXTS)])
    labelled = [(label, text) for label, texts in REVIEWS.items() for text in texts]
    write_rows(root / "train.tsv", [f"{label}\t{text}" for label, text in labelled[1:-1]])
    write_rows(root / "dev.tsv", [f"{label}\t{text}" for label, text in (labelled[0], labelled[-1])])
    stars = {"positive": "5", "negative": "1"}
    write_rows(root / "reviews.csv", ["review,stars"] + [f'"{t}",{stars[label]}' for label, t in labelled])
    write_corpus(root / "corpus.txt", count=600)
    write_multilingual_data(write_eval_data(root / "eval-data"))
    return root


def _write_parquet(path: Path, documents: list[dict[str, str]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {"key": [d["id"] for d in documents], "text": [d["text"] for d in documents]}
    pq.write_table(pa.table(rows), path)
