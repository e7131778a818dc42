"""Corpus input, streamed: text files (``.txt``, ``.gz``, ``.jsonl``), stdin, or the embedded corpus.

Lines are split into sentences with blingfire; sentences outside ``min_words..max_words`` are skipped
(the teacher must read a sentence whole; a character of Chinese, Japanese, Thai... counts as a word).
Nothing is loaded whole: a gigantic line is read in 1 MiB pieces. ``embedded`` names the Debian
dictionary corpus of ``staticsem.distillation.corpus.embedded``.
A source may carry a language tag (``de=news.txt``) for cross-lingual runs; an untagged corpus can be
split by language with py3langid (``CorpusOptions.language`` among ``languages``).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, cast

from staticsem.distillation.corpus.exclude import Exclusion, exclusion_prints
from staticsem.errors import InputError
from staticsem.lines import json_record
from staticsem.text import word_count

logger = logging.getLogger(__name__)
EMBEDDED = "embedded"
_PIECE = 1 << 20


@dataclass(frozen=True)
class CorpusOptions:
    """How sentences are taken from the corpus."""

    min_words: int = 3
    max_words: int = 64
    text_field: str = "text"
    max_sentences: int | None = None
    language: str | None = None  # keep only sentences identified as this language ...
    languages: tuple[str, ...] = ()  # ... among these (py3langid)
    exclude: tuple[str, ...] = ()  # files of sentences (or their hashes) never to use (exclude.py)

    def key(self) -> dict[str, object]:
        """The options as a dict for step keys (language and exclusion fields only when set; the
        exclusion by the content of its files)."""
        key = {k: v for k, v in asdict(self).items() if k not in _SET_ONLY or v}
        if self.exclude:
            key["exclude"] = exclusion_prints(self.exclude)
        return key


_SET_ONLY = ("language", "languages", "exclude")


_TAG = re.compile(r"^([a-z]{2,3}(?:[-_][A-Za-z0-9]+)?)=(.+)$")


def untag(source: str) -> tuple[str | None, str]:
    """Split ``LANG=PATH`` into its language and path (an existing file named so stays untagged)."""
    match = _TAG.match(source)
    if match is None or Path(source).exists():
        return None, source
    return match.group(1), match.group(2)


def _identifier(language: str, languages: Sequence[str]) -> Callable[[str], bool]:
    """A test for "this sentence is in ``language``" among ``languages`` (py3langid)."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise InputError("splitting a corpus by language needs `pip install py3langid`") from None
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    try:
        identifier.set_languages(list(languages))
    except ValueError as exc:
        raise InputError(f"language identification: {exc}") from None
    return lambda sentence: bool(identifier.classify(sentence)[0] == language)


def open_corpus(path: Path) -> IO[bytes]:
    """A corpus file opened for bytes (``.gz`` read through); missing, unreadable or binary: InputError."""
    if not path.is_file():
        raise InputError(f"{path}: corpus file is missing")
    handle = cast(IO[bytes], gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb"))  # noqa: SIM115
    try:
        head = handle.peek(8192)[:8192] if hasattr(handle, "peek") else b""
    except (OSError, EOFError) as exc:
        handle.close()
        raise InputError(f"{path}: cannot read ({exc})") from None
    if b"\0" in head:
        handle.close()
        raise InputError(f"{path}: binary data (NUL bytes), not a text corpus")
    return handle


def _cut(piece: bytes) -> int:
    """Where to end a piece of an over-long line: after its last sentence end, else its last space."""
    end = max(piece.rfind(mark) for mark in (b". ", b"! ", b"? "))
    if end >= 0:
        return end + 2
    space = piece.rfind(b" ")
    return space + 1 if space > 0 else len(piece)


def _raw_lines(source: str) -> Iterator[tuple[str, int, bytes]]:
    """(name, line number, bytes); a line over 1 MiB comes in pieces cut between sentences."""
    if source == "-":
        handle: IO[bytes] = sys.stdin.buffer
        name = "<stdin>"
    else:
        handle, name = open_corpus(Path(source)), source
    number, carry, warned = 1, b"", False
    try:
        while True:
            raw = carry + handle.readline(_PIECE)
            carry = b""
            if not raw:
                return
            if not raw.endswith(b"\n") and len(raw) >= _PIECE:
                if not warned:
                    logger.warning("%s:%d: line longer than 1 MiB, read in pieces", name, number)
                    warned = True
                cut = _cut(raw)
                raw, carry = raw[:cut], raw[cut:]
            yield name, number, raw
            if raw.endswith(b"\n"):
                number += 1
    except (OSError, EOFError) as exc:
        raise InputError(f"{name}: cannot read at line {number} ({exc})") from None
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def iter_texts(source: str, text_field: str = "text") -> Iterator[str]:
    """Texts of one corpus source: lines, or the ``text_field`` of each JSON line of a ``.jsonl``."""
    source = untag(source)[1]
    if source == EMBEDDED:
        from staticsem.distillation.corpus.embedded import embedded_texts

        yield from embedded_texts()
        return
    is_jsonl = source.endswith((".jsonl", ".jsonl.gz"))
    bad, first_bad = 0, 0
    for name, number, raw in _raw_lines(source):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad, first_bad = bad + 1, first_bad or number
            if bad == 100 and number <= 200:
                raise InputError(
                    f"{name}: mostly not UTF-8 text (lines 1-{number}); not a text corpus"
                ) from None
            continue
        if is_jsonl:
            text = json_record(text, text_field, f"{name}:{number}")[text_field]
        yield text
    if bad:
        logger.warning("%s: skipped %d lines that are not UTF-8 (the first: line %d)", source, bad, first_bad)


def iter_sentences(
    sources: Sequence[str], options: CorpusOptions = CorpusOptions(), excluded: dict[str, int] | None = None
) -> Iterator[str]:
    """Sentences of all sources in order, within the word limits, de-duplicated by exact text.

    With ``options.exclude``, a line whose whole text is listed there is dropped, and so is every listed
    sentence; ``excluded`` (if given) counts the distinct dropped sentences per source.
    """
    from blingfire import text_to_sentences

    keep = _identifier(options.language, options.languages) if options.language else None
    banned = Exclusion(options.exclude) if options.exclude else None
    seen: set[bytes] = set()
    emitted = 0
    for source in sources:
        dropped = 0
        for text in iter_texts(source, options.text_field):
            text = text.replace("\0", " ").strip()
            if not text:
                continue
            whole = banned is not None and text in banned
            for sentence in text_to_sentences(text).split("\n"):
                if not options.min_words <= word_count(sentence) <= options.max_words:
                    continue
                digest = hashlib.blake2b(sentence.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                if digest in seen:
                    continue
                # a one-sentence line was looked up already (whole): hash it once
                if banned is not None and (whole or (sentence != text and sentence in banned)):
                    seen.add(digest)  # counted once
                    dropped += 1
                    continue
                if keep is not None and not keep(sentence):
                    continue
                seen.add(digest)
                yield sentence
                emitted += 1
                if options.max_sentences is not None and emitted >= options.max_sentences:
                    _tally(excluded, source, dropped)
                    return
        _tally(excluded, source, dropped)


def _tally(excluded: dict[str, int] | None, source: str, dropped: int) -> None:
    if excluded is not None:
        excluded[source] = excluded.get(source, 0) + dropped


def fingerprint_sources(sources: Sequence[str]) -> list[dict[str, object]]:
    """Name, size and SHA-256 of each corpus file (for the model's config)."""
    prints: list[dict[str, object]] = []
    for language, source in map(untag, sources):
        if language:
            prints.append({"language": language, **fingerprint_sources([source])[0]})
            continue
        if source == EMBEDDED:
            from staticsem.distillation.corpus.embedded import embedded_fingerprint

            prints.append(embedded_fingerprint())
            continue
        if source == "-":
            prints.append({"source": "<stdin>"})
            continue
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: corpus file is missing")
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(functools.partial(handle.read, 1 << 22), b""):
                digest.update(block)
        prints.append({"source": str(path), "bytes": path.stat().st_size, "sha256": digest.hexdigest()})
    return prints


def check_sources(sources: Sequence[str]) -> None:
    """Fail early, naming the source, when a corpus source cannot be used."""
    if not sources:
        raise InputError("no corpus given: pass --corpus FILE (or 'embedded')")
    paths = [untag(source)[1] for source in sources]
    if paths.count("-") > 1:
        raise InputError("stdin ('-') can be given only once")
    for source in paths:
        if source not in (EMBEDDED, "-"):
            open_corpus(Path(source)).close()
