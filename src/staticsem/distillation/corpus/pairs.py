"""Pairs files for retrieval training: ``query<TAB>positive[<TAB>negative]`` a line, ``.tsv`` or ``.tsv.gz``.

Every line of a file has two columns, or every line three (a hard negative). A line with one column or more
than three, an empty side, a negative on some lines only, or text that is not UTF-8 is a one-line error
naming the file and line. With ``exclude`` (the decontamination lists of ``distill --exclude``) a pair goes
when its query or any sentence of its positive or negative is listed; exact duplicates go too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from staticsem.distillation.corpus.exclude import Exclusion
from staticsem.distillation.corpus.reading import open_corpus
from staticsem.errors import InputError

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")  # enough to find a listed sentence inside a passage
SIDES = ("query", "positive", "negative")


@dataclass
class Pairs:
    """Queries, their positives, their negatives (None where none was given) and each pair's file."""

    queries: list[str] = field(default_factory=list)
    positives: list[str] = field(default_factory=list)
    negatives: list[str | None] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> pairs

    def __len__(self) -> int:
        return len(self.queries)

    def counts(self) -> dict[str, int]:
        """Pairs kept per file."""
        return dict(Counter(self.sources))


def listed(text: str, exclusion: Exclusion) -> bool:
    """Whether ``text`` or one of its sentences is in ``exclusion``."""
    return text in exclusion or any(part in exclusion for part in SENTENCE_END.split(text))


def _fields(path: Path, number: int, raw: bytes, width: int | None) -> list[str]:
    try:
        line = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise InputError(f"{path}:{number}: not valid UTF-8") from None
    fields = [f.strip() for f in line.split("\t")]
    if len(fields) == 1:
        raise InputError(f"{path}:{number}: one column; a pairs line is query<TAB>positive[<TAB>negative]")
    if len(fields) > 3:
        raise InputError(f"{path}:{number}: {len(fields)} columns; a pairs line has 2 or 3")
    for side, text in zip(SIDES, fields, strict=False):
        if not text:
            raise InputError(f"{path}:{number}: the {side} is empty")
    if width is not None and len(fields) != width:
        which = "this line has one, the first has none" if len(fields) == 3 else "the first line has one"
        raise InputError(f"{path}:{number}: a negative on some lines only ({which})")
    return fields


def read_pairs_files(
    paths: Sequence[str | Path], exclude: Sequence[str] = (), limit: int | None = None
) -> Pairs:
    """The pairs of ``paths`` (at most ``limit`` from each file), minus listed and duplicate ones.

    :raises InputError: for a missing or binary file, a malformed line (file and line named), a file with
        no pairs, or no pairs left at all.
    """
    exclusion = Exclusion(list(exclude)) if exclude else None
    pairs, seen = Pairs(), set[tuple[str, ...]]()
    for source in paths:
        path, width, kept = Path(source), None, 0
        with open_corpus(path) as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                fields = _fields(path, number, raw, width)
                width = len(fields)
                if limit is not None and kept >= limit:
                    break
                if tuple(fields) in seen:
                    pairs.dropped["duplicate"] += 1
                    continue
                seen.add(tuple(fields))
                if exclusion is not None and any(listed(text, exclusion) for text in fields):
                    pairs.dropped["excluded"] += 1
                    continue
                pairs.queries.append(fields[0])
                pairs.positives.append(fields[1])
                pairs.negatives.append(fields[2] if width == 3 else None)
                pairs.sources.append(path.name)
                kept += 1
        if width is None:
            raise InputError(f"{path}: no pairs in this file")
    if not pairs:
        raise InputError("no pairs left after --exclude and duplicates")
    return pairs
