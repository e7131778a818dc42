"""A teacher's batches made ready off the critical path: texts tokenised as the teacher's own tokenizer does
(HF ``tokenizers``, configured as ``transformers`` configures it: truncation, padding, offsets, special
tokens) and, for extraction, where each vocabulary word's tokens are. Numpy and ``tokenizers`` only, so it
runs in a thread ahead of the teacher or in worker processes (``workers.Pool``: ``setup`` and ``job``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from staticsem.distillation.workers import Message, join_bytes, split_bytes
from staticsem.phrases import PhraseTable, entry_table, joined
from staticsem.text import WordSplitter, containing_span, make_splitter, overlapping_span

_SPACES = re.compile(r"\s+")  # str.isspace() characters, as sre matches \s in str patterns


@dataclass(frozen=True)
class TokenizerSpec:
    """What a teacher's tokenizer does to a batch (JSON-able, for worker processes)."""

    json: str  # the fast tokenizer (``tokenizers``' JSON)
    max_length: int
    truncation_side: str
    padding_side: str
    pad_id: int
    pad_token: str
    pad_type_id: int
    names: tuple[str, ...]  # the model's inputs: input_ids, attention_mask (, token_type_ids)
    prompt: str = ""

    @classmethod
    def of(cls, tokenizer: Any, max_length: int, prompt: str) -> TokenizerSpec:
        """The spec of a ``transformers`` fast tokenizer, as the teacher calls it (padding to the longest,
        truncation at ``max_length``), with ``prompt`` before every text."""
        names = [
            n for n in ("input_ids", "token_type_ids", "attention_mask") if n in tokenizer.model_input_names
        ]
        return cls(
            tokenizer.backend_tokenizer.to_str(),
            max_length,
            tokenizer.truncation_side,
            tokenizer.padding_side,
            int(tokenizer.pad_token_id or 0),
            str(tokenizer.pad_token),
            int(tokenizer.pad_token_type_id or 0),
            tuple(names),
            prompt,
        )

    def tokenizer(self) -> Tokenizer:
        """The fast tokenizer, truncating and padding as ``transformers`` sets it up for the teacher."""
        tokenizer = Tokenizer.from_str(self.json)
        tokenizer.enable_truncation(
            self.max_length, stride=0, strategy="longest_first", direction=self.truncation_side
        )
        tokenizer.enable_padding(
            direction=self.padding_side,
            pad_id=self.pad_id,
            pad_type_id=self.pad_type_id,
            pad_token=self.pad_token,
            length=None,
            pad_to_multiple_of=None,
        )
        tokenizer.encode_special_tokens = False
        return tokenizer


@dataclass
class Encoded:
    """A batch of texts tokenised for the teacher (B × T arrays)."""

    inputs: dict[str, np.ndarray]  # int64, the model's inputs
    own: np.ndarray  # bool, the texts' own tokens (not special, not padding, not the prompt)
    offsets: np.ndarray  # int64 B × T × 2 character offsets in each text (the prompt's tokens at 0)


@dataclass
class Prepared(Encoded):
    """A batch ready for extraction: tokenised, and each occurrence of a vocabulary word located."""

    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the texts' numbers
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # flat b*T+t of those tokens
    occurrence_of: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )  # each token's occurrence
    words: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # each occurrence's word row

    # what crosses from a worker process: all the reduction reads (not the offsets, used up in locating the
    # words), the integers as int32 when they fit (half the bytes through the pipe), int64 again on arrival
    ARRAYS = ("own", "rows", "positions", "occurrence_of", "words")

    def message(self) -> Message:
        """As a worker's message."""
        arrays = {name: getattr(self, name) for name in self.ARRAYS}
        arrays |= {f"in.{k}": v for k, v in self.inputs.items()}
        return Message({"names": list(self.inputs)}, {k: _narrow(v) for k, v in arrays.items()})

    @classmethod
    def from_message(cls, message: Message) -> Prepared:
        arrays = {k: _widen(v) for k, v in message.arrays.items()}
        inputs = {name: arrays[f"in.{name}"] for name in message.meta["names"]}
        empty = np.zeros((len(arrays["rows"]), 0, 2), np.int64)
        return cls(inputs, offsets=empty, **{name: arrays[name] for name in cls.ARRAYS})


def _narrow(array: np.ndarray) -> np.ndarray:
    if array.dtype != np.int64 or (array.size and not -(2**31) <= array.min() <= array.max() < 2**31):
        return array
    return array.astype(np.int32)


def _widen(array: np.ndarray) -> np.ndarray:
    return array.astype(np.int64) if array.dtype == np.int32 else array


def trim_offsets(texts: Sequence[str], offsets: np.ndarray) -> np.ndarray:
    """Token offsets whose start skips leading whitespace (SentencePiece's "▁word" spans its space)."""
    runs = [[m.span() for m in _SPACES.finditer(text)] for text in texts]
    if not any(runs):
        return offsets.copy()
    starts, ends = offsets[..., 0].astype(np.int64), offsets[..., 1].astype(np.int64)
    rows = np.broadcast_to(np.arange(len(texts))[:, None], starts.shape)
    run, flat, _ = containing_span(runs, rows.ravel(), starts.ravel())
    run = run.reshape(starts.shape)
    moved = np.where((run >= 0) & (starts < ends), np.minimum(flat[run, 1], ends), starts)
    return np.stack([moved.astype(offsets.dtype), offsets[..., 1]], axis=-1)


def encode(tokenizer: Tokenizer, spec: TokenizerSpec, texts: Sequence[str]) -> Encoded:
    """``texts`` as the teacher reads them (its prompt before each): inputs, own tokens and offsets."""
    prompted = [spec.prompt + text for text in texts]
    encodings = tokenizer.encode_batch(prompted, add_special_tokens=True)
    fields = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}
    inputs = {name: np.array([getattr(e, fields[name]) for e in encodings], np.int64) for name in spec.names}
    raw = np.array([e.offsets for e in encodings], np.int64).reshape(len(texts), -1, 2)
    special = np.array([e.special_tokens_mask for e in encodings], bool)
    if spec.prompt:  # the prompt's tokens: all their characters its (one running into the text is the text's)
        special |= raw[..., 1] <= len(spec.prompt)
    offsets = np.maximum(trim_offsets(prompted, raw) - len(spec.prompt), 0)
    attention = np.array([e.attention_mask for e in encodings], bool)
    return Encoded(inputs, attention & ~special, offsets)


def occurrences(
    texts: Sequence[str],
    offsets: np.ndarray,
    own: np.ndarray,
    index: dict[str, int],
    lowercase: bool,
    splitter: WordSplitter,
    phrases: PhraseTable | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token positions (flat b*T+t), their occurrence number, and each occurrence's word id.

    An occurrence is a word span of a text holding at least one of the text's own tokens (a token belongs to
    the first word it covers, ``text.overlapping_span``); occurrences are numbered in text and span order.
    With ``phrases`` (a table over ``index``'s rows), each phrase of a text (matched as encoding matches
    them, every word holding a token) is one more occurrence, of all its words' tokens, numbered after the
    words'.
    """
    rows, cols = np.nonzero(own)
    spans = [splitter.spans(t) for t in texts]
    span, flat, owner = overlapping_span(spans, rows, offsets[rows, cols, 0], offsets[rows, cols, 1])
    inside = span >= 0
    rows, cols, span = rows[inside], cols[inside], span[inside]
    hit = np.unique(span)  # spans holding a token, in text order
    words = np.fromiter(
        (
            word_row(texts[b][start:end], index, lowercase)
            for b, (start, end) in zip(owner[hit].tolist(), flat[hit].tolist(), strict=True)
        ),
        np.int64,
        count=len(hit),
    )
    known = words >= 0
    number = np.full(len(flat), -1, np.int64)
    number[hit[known]] = np.arange(int(known.sum()))
    occurrence_of = number[span]
    kept = occurrence_of >= 0
    width = offsets.shape[1]
    located = ((rows[kept] * width + cols[kept]).astype(np.int64), occurrence_of[kept], words[known])
    if phrases is None or not len(flat):
        return located
    span_rows = np.full(len(flat), -1, np.int64)  # a span without a token is in no phrase
    span_rows[hit] = words
    found = phrases.match(span_rows, span_links(texts, flat, owner))
    if not len(found.starts):
        return located
    of_span = np.full(len(flat), -1, np.int64)  # each span's phrase occurrence
    members, phrase = found.members()
    of_span[members] = phrase
    taken = of_span[span] >= 0
    return (
        np.concatenate([located[0], (rows[taken] * width + cols[taken]).astype(np.int64)]),
        np.concatenate([located[1], len(located[2]) + of_span[span[taken]]]),
        np.concatenate([located[2], found.rows]),
    )


def span_links(texts: Sequence[str], flat: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Whether each word span (``flat``, of text ``owner``) may form a phrase with the next: the same text,
    only whitespace between them."""
    links = np.zeros(len(flat), bool)
    for i in np.flatnonzero(owner[1:] == owner[:-1]).tolist():
        links[i] = joined(texts[int(owner[i])][int(flat[i, 1]) : int(flat[i + 1, 0])])
    return links


def word_row(word: str, index: dict[str, int], lowercase: bool) -> int:
    """The vocabulary row of a word as written (lower-cased for uncased teachers; a cased teacher
    falls back to the lower-case form), or -1."""
    row = index.get(word.lower() if lowercase else word)
    if row is None and not lowercase:
        row = index.get(word.lower())
    return -1 if row is None else row


@dataclass
class Preparer:
    """Makes extraction batches: ``spec``'s tokenizer, the vocabulary ``words`` and how texts split."""

    spec: TokenizerSpec
    words: Sequence[str]
    lowercase: bool
    splitter: str = "words"
    splitter_tokenizer: str | None = None  # the subword tokenizer's JSON (subword and greedy splitters)

    def __post_init__(self) -> None:
        self._tokenizer = self.spec.tokenizer()
        self._index = {w: i for i, w in enumerate(self.words)}
        self._phrases = entry_table(self.words)
        pieces = None if self.splitter_tokenizer is None else Tokenizer.from_str(self.splitter_tokenizer)
        self._split = WordSplitter() if self.splitter == "words" else make_splitter(self.splitter, pieces)

    def params(self) -> dict[str, Any]:
        """What a worker process makes the same preparer from (``setup``)."""
        return {
            "spec": asdict(self.spec),
            "words": list(self.words),
            "lowercase": self.lowercase,
            "splitter": self.splitter,
            "splitter_tokenizer": self.splitter_tokenizer,
        }

    def __call__(self, texts: Sequence[str], rows: np.ndarray | None = None) -> Prepared:
        """The batch of ``texts`` (numbered ``rows``) ready for the teacher and the reduction."""
        encoded = encode(self._tokenizer, self.spec, texts)
        located = occurrences(
            texts, encoded.offsets, encoded.own, self._index, self.lowercase, self._split, self._phrases
        )
        numbers = np.arange(len(texts), dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
        return Prepared(encoded.inputs, encoded.own, encoded.offsets, numbers, *located)


def setup(params: dict[str, Any]) -> Preparer:
    """A worker's preparer (``Preparer.params``)."""
    spec = TokenizerSpec(**{**params["spec"], "names": tuple(params["spec"]["names"])})
    return Preparer(
        spec, params["words"], params["lowercase"], params["splitter"], params["splitter_tokenizer"]
    )


def request(texts: Sequence[str], rows: np.ndarray) -> Message:
    """A batch for a worker: ``texts`` as one UTF-8 blob and where each starts (not JSON, whose encoding
    holds the parent's interpreter lock about 12 µs a sentence), numbered ``rows``."""
    blob, starts = join_bytes([text.encode("utf-8", "surrogatepass") for text in texts])
    return Message({}, {"rows": np.asarray(rows, np.int64), "starts": starts}, {"texts": blob})


def job(preparer: Preparer, message: Message) -> Message:
    """A worker's batch (``request``) → the prepared batch."""
    parts = split_bytes(message.blobs["texts"], message.arrays["starts"])
    texts = [part.decode("utf-8", "surrogatepass") for part in parts]
    return preparer(texts, message.arrays["rows"]).message()
