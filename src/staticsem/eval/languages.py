"""The language of each evaluation set, read from its file name, and ``--languages`` selection.

A set's file name carries its language codes between dashes: ``stsb-de-dev.tsv`` is German STS,
``stsb-en-de-dev.tsv`` English–German STS and ``tatoeba-laser-deu-eng.tsv`` English–German bitext
(ISO 639-1 codes, or the ISO 639-3 codes Tatoeba uses). A set pairing English with another language
belongs to that language; a pair without English to both (``de-fr``); a name without a code to its
task's default (English for ``sts``, none for the others).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from staticsem.errors import InputError

ENGLISH = "en"
ALL = "all"
# ISO 639-3 (and 639-2/B) codes of file names such as Tatoeba's, to their ISO 639-1 code
ISO3 = {
    "ara": "ar", "ces": "cs", "cmn": "zh", "dan": "da", "deu": "de", "ell": "el", "eng": "en", "fin": "fi",
    "fra": "fr", "fre": "fr", "ger": "de", "heb": "he", "hin": "hi", "hun": "hu", "ind": "id", "ita": "it",
    "jpn": "ja", "kor": "ko", "nld": "nl", "nob": "nb", "pol": "pl", "por": "pt", "ron": "ro", "rus": "ru",
    "spa": "es", "swe": "sv", "tha": "th", "tur": "tr", "ukr": "uk", "vie": "vi", "zho": "zh", "chi": "zh",
}  # fmt: skip
_CODE = re.compile(r"[a-z]{2}")


def codes(stem: str) -> list[str]:
    """The language codes in a file stem, in order, as ISO 639-1 (``stsb-en-de-dev`` → ``["en", "de"]``)."""
    found: list[str] = []
    for part in stem.lower().split("-"):
        code = part if _CODE.fullmatch(part) else ISO3.get(part)
        if code and code not in found:
            found.append(code)
    return found


def language_of(stem: str, default: str | None = None) -> str | None:
    """The language a set counts for: its one code, the other side of an English pair, or ``default``."""
    found = codes(stem)
    if len(found) > 1:
        found = [code for code in found if code != ENGLISH] or [ENGLISH]
    return "-".join(found) if found else default


def parse_languages(items: Iterable[str] | None) -> tuple[str, ...] | None:
    """``--languages`` values (comma-separated, repeatable) as codes; ``None`` for none given or ``all``.

    :raises InputError: for a value that is not a two-letter code.
    """
    names = [name.strip().lower() for item in items or () for name in item.split(",") if name.strip()]
    if not names or ALL in names:
        return None
    bad = [name for name in names if not _CODE.fullmatch(name)]
    if bad:
        raise InputError(f"--languages: {', '.join(bad)}: not a two-letter language code (ISO 639-1)")
    return tuple(dict.fromkeys(names))


def wanted(language: str | None, languages: Sequence[str] | None) -> bool:
    """Whether a set of ``language`` is measured under ``languages`` (``None``: every set)."""
    if languages is None:
        return True
    return language is not None and all(part in languages for part in language.split("-"))


def select(
    paths: Sequence[Path], languages: Sequence[str] | None, default: str | None, task: str
) -> list[Path]:
    """The ``paths`` whose set is in ``languages``.

    :raises InputError: when none is.
    """
    kept = [path for path in paths if wanted(language_of(path.stem, default), languages)]
    if not kept:
        asked = ", ".join(languages or ())
        raise InputError(f"{task}: no set in {asked} among {', '.join(p.name for p in paths)}")
    return kept
