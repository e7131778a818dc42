"""Corpus reading across processes: ``scan`` yields exactly ``reading.iter_sentences``'s sentences, in order,
with the per-sentence work spread over ``--workers`` processes (``staticsem.distillation.workers``).

This process reads the raw lines (decompression is one stream) and hands them out in messages. A worker
decodes them, splits sentences (blingfire), checks their length, hashes them for de-duplication and
(``--exclude``) for the exclusion list, identifies their language where asked, and, when words are wanted,
splits them into the words the vocabulary counts (each message's distinct words and their ids). What depends
on the stream's order stays here: duplicates (an 8-byte digest set), the excluded tally, the sentence limit,
the UTF-8 error rule and the first-seen order of words. So the result equals the one-process reading bit for
bit, whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.distillation.corpus.reading import EMBEDDED, CorpusOptions, _identifier, _raw_lines, untag
from staticsem.distillation.workers import Message, Pool, join_bytes, split_bytes
from staticsem.errors import InputError
from staticsem.lines import json_record
from staticsem.phrases import joined
from staticsem.text import word_count

logger = logging.getLogger(__name__)
LINES = 4096  # raw lines per message
BANNED, KEPT_LANGUAGE = 1, 2  # candidate flags


@dataclass(frozen=True)
class Words:
    """How sentences split into the words the vocabulary counts (``sampling.sentence_words``)."""

    lowercase: bool
    splitter: str = "words"
    tokenizer: str | None = None  # the subword tokenizer's JSON, for the subword and greedy splitters
    links: bool = False  # also whether each word may form a phrase with the next (``phrases.joined``)


@dataclass
class Kept:
    """Sentences of the stream, in order, with their ``word_count`` and (when asked) their words as ids
    into the scan's growing word table (first-seen order): ``ids`` flat, ``tokens`` per sentence."""

    sentences: list[str]
    lengths: np.ndarray  # int32 word_count of each sentence
    ids: np.ndarray | None = None  # int64
    tokens: np.ndarray | None = None  # int64 words per sentence
    links: np.ndarray | None = None  # uint8 per word: only whitespace between it and the next (with links)


# ------------------------------------------------------------------ in a worker
def setup(params: dict[str, Any]) -> dict[str, Any]:
    """A worker's state: the options, the exclusion list, the language test and the word splitter."""
    from staticsem.distillation.corpus.exclude import Exclusion

    given = params["options"]
    options = CorpusOptions(**{**given, **{k: tuple(given[k]) for k in ("languages", "exclude")}})
    state: dict[str, Any] = {
        "options": options,
        "banned": Exclusion(options.exclude) if options.exclude else None,
        "keep": _identifier(options.language, options.languages) if options.language else None,
        "split": None,
    }
    words = params.get("words")
    if words is not None:
        from tokenizers import Tokenizer

        from staticsem.text import make_splitter

        tokenizer = Tokenizer.from_str(words["tokenizer"]) if words["tokenizer"] else None
        splitter = make_splitter(words["splitter"], tokenizer)
        state["split"] = splitter.words
        state["spans"] = splitter.spans if words.get("links") else None
        state["lowercase"] = words["lowercase"]
    return state


def job(state: dict[str, Any], message: Message) -> Message:
    """One message's texts (raw lines or texts) as candidate sentences: their text, digest, flags, word
    count and words."""
    from blingfire import text_to_sentences

    options: CorpusOptions = state["options"]
    banned, keep, split = state["banned"], state["keep"], state["split"]
    texts, bad = _texts(message, options.text_field)
    found: list[str] = []
    digests: list[bytes] = []
    flags: list[int] = []
    lengths: list[int] = []
    for text in texts:
        text = text.replace("\0", " ").strip()
        if not text:
            continue
        whole = banned is not None and text in banned
        for sentence in text_to_sentences(text).split("\n"):
            size = word_count(sentence)
            if not options.min_words <= size <= options.max_words:
                continue
            encoded = sentence.encode("utf-8", "surrogatepass")
            listed = banned is not None and (whole or (sentence != text and sentence in banned))
            language = keep is None or listed or bool(keep(sentence))
            found.append(sentence)
            digests.append(hashlib.blake2b(encoded, digest_size=8).digest())
            flags.append(BANNED * listed + KEPT_LANGUAGE * language)
            lengths.append(size)
    passed: dict[str, Any] = {k: message.meta[k] for k in ("source", "name", "last") if k in message.meta}
    result = Message(
        {"count": len(found), **passed},
        {"flags": np.asarray(flags, np.uint8), "lengths": np.asarray(lengths, np.int32), "bad": bad},
        {"digests": b"".join(digests), "sentences": "\n".join(found).encode("utf-8", "surrogatepass")},
    )
    if split is not None:
        _words(result, found, split, state["lowercase"], state["spans"])
    return result


def _texts(message: Message, text_field: str) -> tuple[list[str], np.ndarray]:
    """The message's texts (decoded lines, or the texts it holds) and the numbers of its non-UTF-8 lines."""
    if "texts" in message.meta:
        return list(message.meta["texts"]), np.zeros(0, np.int64)
    blob, starts, numbers = message.blobs["lines"], message.arrays["starts"], message.arrays["numbers"]
    name, jsonl = message.meta["name"], message.meta["jsonl"]
    texts: list[str] = []
    bad: list[int] = []
    for line, number in zip(split_bytes(blob, starts), numbers.tolist(), strict=True):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(number)
            continue
        texts.append(json_record(text, text_field, f"{name}:{number}")[text_field] if jsonl else text)
    return texts, np.asarray(bad, np.int64)


def _words(result: Message, sentences: list[str], split: Any, lowercase: bool, spans: Any = None) -> None:
    """Each sentence's words as ids into the message's own table of distinct words (first-seen order); with
    ``spans`` (the splitter's), each word's link to the next too."""
    table: dict[str, int] = {}
    ids: list[int] = []
    links: list[bool] = []
    tokens = np.zeros(len(sentences), np.int64)
    for i, sentence in enumerate(sentences):
        if spans is None:
            words = split(sentence)
        else:
            found = spans(sentence)
            words = [sentence[a:b] for a, b in found]
            links += [joined(sentence[a[1] : b[0]]) for a, b in zip(found, found[1:], strict=False)]
            links += [False] * bool(found)  # a sentence's last word links to nothing
        if lowercase:
            words = [w.lower() for w in words]
        tokens[i] = len(words)
        ids += [table.setdefault(w, len(table)) for w in words]
    result.arrays.update(ids=np.asarray(ids, np.int64), tokens=tokens)
    if spans is not None:
        result.arrays["links"] = np.asarray(links, np.uint8)
    result.meta["words"] = list(table)


# ------------------------------------------------------------------ here
def _messages(sources: Sequence[str], text_field: str) -> Iterator[Message]:
    """The raw lines (or embedded texts) of each source in messages of ``LINES``; a source's last message
    says ``last`` (an empty source has one too)."""
    for number, source in enumerate(sources):
        path = untag(source)[1]
        if path == EMBEDDED:
            from staticsem.distillation.corpus.embedded import embedded_texts

            batch: list[str] = []
            for text in embedded_texts():
                batch.append(text)
                if len(batch) == LINES:
                    yield Message({"source": number, "texts": batch})
                    batch = []
            yield Message({"source": number, "texts": batch, "last": True})
            continue
        jsonl, raws, numbers = path.endswith((".jsonl", ".jsonl.gz")), [], []
        name = "<stdin>" if path == "-" else path
        for name, line, raw in _raw_lines(path):
            raws.append(raw)
            numbers.append(line)
            if len(raws) == LINES:
                yield _lines(number, name, jsonl, raws, numbers)
                raws, numbers = [], []
        yield _lines(number, name, jsonl, raws, numbers, last=True)


def _lines(
    source: int, name: str, jsonl: bool, raws: list[bytes], numbers: list[int], last: bool = False
) -> Message:
    blob, starts = join_bytes(raws)
    meta = {"source": source, "name": name, "jsonl": jsonl, **({"last": True} if last else {})}
    return Message(meta, {"starts": starts, "numbers": np.asarray(numbers, np.int64)}, {"lines": blob})


class _Order:
    """What follows the stream's order: duplicates, the excluded tally, the limit, the UTF-8 rule."""

    def __init__(self, sources: Sequence[str], options: CorpusOptions, excluded: dict[str, int] | None):
        self.sources, self.options, self.excluded = sources, options, excluded
        self.seen: set[bytes] = set()
        self.emitted = self.dropped = self.bad = self.first_bad = 0
        self.done = False

    def keep(self, result: Message) -> np.ndarray:
        """Indices of the message's candidates that the stream yields (``done`` once the limit is met)."""
        self._check_bad(result)
        digests, flags = result.blobs["digests"], result.arrays["flags"].tolist()
        seen, limit, kept = self.seen, self.options.max_sentences, []
        for i, flag in enumerate(flags):
            digest = digests[8 * i : 8 * i + 8]
            if digest in seen:
                continue
            if flag & BANNED:
                seen.add(digest)  # counted once
                self.dropped += 1
                continue
            if not flag & KEPT_LANGUAGE:
                continue
            seen.add(digest)
            kept.append(i)
            self.emitted += 1
            if limit is not None and self.emitted >= limit:
                self.done = True
                break
        if self.done or result.meta.get("last"):
            self._end(result.meta["source"], finished=not self.done)
        return np.asarray(kept, np.int64)

    def _check_bad(self, result: Message) -> None:
        for number in result.arrays["bad"].tolist():
            self.bad, self.first_bad = self.bad + 1, self.first_bad or number
            if self.bad == 100 and number <= 200:
                raise InputError(
                    f"{result.meta['name']}: mostly not UTF-8 text (lines 1-{number}); not a text corpus"
                )

    def _end(self, number: int, finished: bool) -> None:
        """The tally of source ``number`` (and, read to its end, its warning about non-UTF-8 lines)."""
        source = self.sources[number]
        if self.excluded is not None:
            self.excluded[source] = self.excluded.get(source, 0) + self.dropped
        if self.bad and finished:
            logger.warning(
                "%s: skipped %d lines that are not UTF-8 (the first: line %d)",
                untag(source)[1],
                self.bad,
                self.first_bad,
            )
        self.dropped = self.bad = self.first_bad = 0


def scan(
    sources: Sequence[str],
    options: CorpusOptions | None = None,
    *,
    workers: int = 1,
    excluded: dict[str, int] | None = None,
    words: Words | None = None,
    table: dict[str, int] | None = None,
) -> Iterator[Kept]:
    """``iter_sentences(sources, options, excluded)`` in chunks, the work on ``workers`` processes; with
    ``words``, each sentence's words too, as ids into ``table`` (word → id), which grows in the order the
    words are first seen."""
    options = options or CorpusOptions()
    params = {"options": asdict(options), "words": None if words is None else asdict(words)}
    if _bytes(sources) < SMALL:  # starting processes would take longer than reading
        workers = 1
    order = _Order(sources, options, excluded)
    table = {} if table is None else table
    with Pool("staticsem.distillation.corpus.scan:job", params, setup=_SETUP, workers=workers) as pool:
        for result in pool.map(_messages(sources, options.text_field)):
            kept = order.keep(result)
            if len(kept) or words is not None:
                yield _chunk(result, kept, table if words is not None else None)
            if order.done:
                return


_SETUP = "staticsem.distillation.corpus.scan:setup"
SMALL = 4 << 20  # a corpus of fewer bytes is read in this process


def _bytes(sources: Sequence[str]) -> float:
    """The corpus files' size (stdin and the embedded corpus: unknown, so large)."""
    total = 0.0
    for source in sources:
        path = Path(untag(source)[1])
        total += path.stat().st_size if path.is_file() else float("inf")
    return total


def _chunk(result: Message, kept: np.ndarray, table: dict[str, int] | None) -> Kept:
    """The kept candidates of a worker's result; their words mapped into ``table`` (new words appended in
    the order they first occur among the kept sentences)."""
    blob = result.blobs["sentences"]
    sentences = blob.decode("utf-8", "surrogatepass").split("\n") if result.meta["count"] else []
    chunk = Kept([sentences[i] for i in kept.tolist()], result.arrays["lengths"][kept])
    if table is None:
        return chunk
    tokens = result.arrays["tokens"]
    mask = np.zeros(len(tokens), bool)
    mask[kept] = True
    words_kept = np.repeat(mask, tokens)
    local = result.arrays["ids"][words_kept]
    words: list[str] = result.meta["words"]
    present, first = np.unique(local, return_index=True)
    mapping = np.full(len(words), -1, np.int64)
    for i in present[np.argsort(first, kind="stable")].tolist():
        mapping[i] = table.setdefault(words[i], len(table))
    chunk.ids, chunk.tokens = mapping[local], tokens[kept]
    if "links" in result.arrays:
        chunk.links = result.arrays["links"][words_kept]
    return chunk


def stream_sentences(
    sources: Sequence[str],
    options: CorpusOptions | None = None,
    *,
    workers: int = 1,
    excluded: dict[str, int] | None = None,
) -> Iterator[str]:
    """``iter_sentences``, read on ``workers`` processes."""
    for chunk in scan(sources, options, workers=workers, excluded=excluded):
        yield from chunk.sentences
