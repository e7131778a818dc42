"""Decontamination: sentences never to train on (``staticsem distill --exclude FILE``).

A file lists sentences one per line, or (``.sha1`` files) their hashes: the first 16 hex digits of
``sha1(normalise(sentence))``, where ``normalise`` lower-cases and turns every run of characters that are
not letters or digits into one space, then strips (the format of evaluation-set hash lists, e.g.
``../shared/data/decontam/eval-sentences.sha1``). Sentences match when their normal forms are equal, so
case, punctuation and spacing do not hide a copy. The corpus reader drops a line whose whole text matches
and every sentence of it that matches.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from staticsem.errors import InputError

HASH_SUFFIX = ".sha1"
EXCLUDE_HELP = (
    "Sentences never to train on (repeatable): a file of sentences, one a line, or of their hashes (.sha1: "
    "16 hex digits of sha1 of the lower-cased text, non-alphanumeric runs as one space); dropped from every "
    "text read."
)
HASH_DIGITS = 16
_NOT_WORD = re.compile(r"[\W_]+")
_HEX = re.compile(f"[0-9a-f]{{{HASH_DIGITS}}}")


def normalise(text: str) -> str:
    """Lower case, every run of characters other than letters and digits one space, stripped."""
    return _NOT_WORD.sub(" ", text.lower()).strip()


def sentence_hash(text: str) -> str:
    """The first 16 hex digits of the SHA-1 of ``normalise(text)``."""
    return hashlib.sha1(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]


def _read_hashes(path: Path) -> Iterable[str]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            value = line.strip().lower()
            if not value:
                continue
            if not _HEX.fullmatch(value):
                raise InputError(
                    f"{path}:{number}: expected {HASH_DIGITS} hex digits (sha1 of a normalised sentence), "
                    f"got {line.strip()[:40]!r}"
                )
            yield value


def _read_sentences(path: Path) -> Iterable[str]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if normalise(line):
                yield sentence_hash(line)


def check_exclude_files(paths: Sequence[str]) -> None:
    """Raise ``InputError`` naming the first listed file that is missing."""
    for path in paths:
        if not Path(path).is_file():
            raise InputError(f"{path}: --exclude file is missing")


@functools.lru_cache(maxsize=4)
def _load(paths: tuple[str, ...], stamps: tuple[tuple[int, int], ...]) -> frozenset[str]:
    hashes: set[str] = set()
    for name in paths:
        path = Path(name)
        try:
            hashes.update(_read_hashes(path) if path.suffix == HASH_SUFFIX else _read_sentences(path))
        except UnicodeDecodeError:
            raise InputError(f"{path}: --exclude file is not UTF-8 text") from None
    return frozenset(hashes)


class Exclusion:
    """The sentences of ``--exclude`` files, as a set of hashes (loaded once per process and file state).

    :raises InputError: for a missing or malformed file (its path and line).
    """

    def __init__(self, paths: Sequence[str]) -> None:
        check_exclude_files(paths)
        stamps = tuple((Path(p).stat().st_size, Path(p).stat().st_mtime_ns) for p in paths)
        self.hashes = _load(tuple(str(p) for p in paths), stamps)

    def __len__(self) -> int:
        return len(self.hashes)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and sentence_hash(text) in self.hashes


def exclusion_prints(paths: Sequence[str]) -> list[str]:
    """SHA-256 of each ``--exclude`` file (what step keys depend on: content, not path)."""
    prints = []
    for path in paths:
        digest = hashlib.sha256()
        with Path(path).open("rb") as handle:
            for block in iter(functools.partial(handle.read, 1 << 22), b""):
                digest.update(block)
        prints.append(digest.hexdigest())
    return prints
