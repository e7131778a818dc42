"""The embedded default corpus: English dictionary prose from Debian's ``wordnet-base`` and ``dict-gcide``.

WordNet 3.0 gives 106,933 glosses and ~35k example sentences (``/usr/share/wordnet/data.*``); GCIDE
(``/usr/share/dictd/gcide.dict.dz``) gives ~250k definition and quotation sentences. Together they
hold ≈ 91 % of the 10k most frequent English words at least 5 times. Install with
``apt-get install wordnet-base dict-gcide``; ``scripts/setup.sh`` does so where apt-get is available.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

from staticsem.errors import InputError

WORDNET = Path("/usr/share/wordnet")
GCIDE = Path("/usr/share/dictd/gcide.dict.dz")
_WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
_MARKUP = re.compile(r"[{}\\]|\[[^\]]*\]")
_NUMBERING = re.compile(r"^\s*(\d+\.|\([a-z]\))\s*")


def available() -> bool:
    """True when both Debian packages are installed."""
    return all((WORDNET / name).is_file() for name in _WORDNET_FILES) and GCIDE.is_file()


def wordnet_texts(root: Path = WORDNET) -> Iterator[str]:
    """Glosses and example sentences: the part after ``|`` of each synset line, split at ``;``."""
    for name in _WORDNET_FILES:
        with (root / name).open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("  ") or " | " not in line:
                    continue
                for part in line.split(" | ", 1)[1].split(";"):
                    part = part.strip().strip('"').strip()
                    if part:
                        yield part[0].upper() + part[1:] + ("" if part[-1] in ".!?" else ".")


def gcide_texts(path: Path = GCIDE) -> Iterator[str]:
    """Definition and quotation paragraphs of GCIDE entries (headwords, synonyms, sources dropped)."""
    paragraph: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            stripped = line.strip()
            indented = line.startswith(" ")
            if not stripped or not indented or stripped.startswith(("Syn:", "[", "--", "Note:")):
                if paragraph:
                    yield " ".join(paragraph)
                    paragraph = []
                continue
            text = _MARKUP.sub("", _NUMBERING.sub("", stripped)).strip()
            if text:
                paragraph.append(text.split(" --", 1)[0])
    if paragraph:
        yield " ".join(paragraph)


def embedded_texts() -> Iterator[str]:
    """WordNet then GCIDE texts.

    :raises InputError: when the Debian packages are not installed.
    """
    if not available():
        raise InputError(
            "the embedded corpus needs Debian's wordnet-base and dict-gcide "
            "(apt-get install wordnet-base dict-gcide); or pass --corpus FILE"
        )
    yield from wordnet_texts()
    yield from gcide_texts()


def embedded_fingerprint() -> dict[str, object]:
    """Sizes and a combined SHA-256 of the embedded corpus files."""
    digest = hashlib.sha256()
    files = [WORDNET / name for name in _WORDNET_FILES] + [GCIDE]
    for path in files:
        digest.update(path.read_bytes())
    return {
        "source": "embedded (wordnet-base + dict-gcide)",
        "bytes": sum(p.stat().st_size for p in files),
        "sha256": digest.hexdigest(),
    }
