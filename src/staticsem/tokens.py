"""Token-level encoding for imported model2vec and sentence-transformers models.

Such a model has one row per token of its own HF tokenizer, and a text is the mean of the rows of all its
tokens (encoded without special tokens), as in ``model2vec.StaticModel.encode`` and sentence-transformers'
``StaticEmbedding``. The libraries differ in three rules, recorded per model in ``TokenRules``:

* model2vec drops the tokenizer's unknown token; sentence-transformers averages its row like any other;
* model2vec cuts a text to ``max_length × median token length`` characters, then to ``max_length`` tokens
  (its config's ``max_length``, 512 by default); sentence-transformers uses the tokenizer's own truncation.

Speed: where the tokenizer never joins or splits across whitespace (BERT-like normalisers and
pre-tokenisers, no added token holding a space), a text's tokens are the concatenation of the tokens of its
whitespace-separated chunks, so each distinct chunk is tokenised once and cached. Other tokenizers, and
texts holding characters on which Python's and the tokenizer's idea of whitespace differ, go through the
tokenizer whole.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from staticsem.errors import ModelFormatError
from staticsem.text import UNKNOWN

_CACHE_LIMIT = 2_000_000
# Normalisers and pre-tokenisers that keep whitespace-separated chunks independent
_CHUNKED_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Strip"}
_WHITESPACE_SPLITS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_FURTHER_SPLITS = {"Punctuation", "Digits"}
# Whitespace to Python's ``str.split`` but a control character to BERT's normaliser (dropped, so it joins
# its neighbours) or not whitespace to the tokenizer: texts holding one are tokenised whole
_AMBIGUOUS_SPACE = re.compile("[\x0b\x0c\x1c-\x1f\x85]")


@dataclass(frozen=True)
class TokenRules:
    """How a token-level model turns a text into token ids (stored in ``config.json``).

    :param drop_unknown: drop the tokenizer's unknown token (model2vec) instead of averaging its row.
    :param max_tokens: keep at most this many tokens of a text (``None``: all).
    :param max_chars: cut a text to this many characters before tokenising (``None``: no cut).
    """

    drop_unknown: bool = True
    max_tokens: int | None = None
    max_chars: int | None = None

    def config(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_config(cls, value: Any) -> TokenRules:
        """Rules from their ``config`` form; ``ModelFormatError`` when malformed."""
        if not isinstance(value, dict) or set(value) - {"drop_unknown", "max_tokens", "max_chars"}:
            raise ModelFormatError(f"'token_encoding' holds drop_unknown, max_tokens, max_chars: {value!r}")
        limits = [value.get("max_tokens"), value.get("max_chars")]
        if any(v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1) for v in limits):
            raise ModelFormatError(f"'token_encoding' limits must be positive integers or null: {value!r}")
        return cls(bool(value.get("drop_unknown", True)), *limits)


def unknown_id(tokenizer: Tokenizer) -> int | None:
    """Id of the tokenizer's unknown token (WordPiece, BPE, WordLevel, Unigram), as model2vec finds it."""
    token = getattr(tokenizer.model, "unk_token", None)
    if token is not None:
        return tokenizer.token_to_id(token)
    unk = json.loads(tokenizer.to_str())["model"].get("unk_id")
    return unk if isinstance(unk, int) else None


def _types(component: dict[str, Any] | None, key: str) -> list[str]:
    """Types of a normaliser / pre-tokeniser, ``Sequence`` unfolded."""
    if component is None:
        return []
    if component.get("type") == "Sequence":
        return [t for part in component.get(key, []) for t in _types(part, key)]
    return [str(component.get("type"))]


def splits_at_whitespace(tokenizer: Tokenizer) -> bool:
    """True when tokenising a text gives the tokens of its whitespace-separated chunks, in order."""
    spec = json.loads(tokenizer.to_str())
    normalizers = _types(spec.get("normalizer"), "normalizers")
    splits = _types(spec.get("pre_tokenizer"), "pretokenizers")
    return (
        set(normalizers) <= _CHUNKED_NORMALIZERS
        and bool(set(splits) & _WHITESPACE_SPLITS)
        and set(splits) <= _WHITESPACE_SPLITS | _FURTHER_SPLITS
        and not any(
            re.search(r"\s", str(token.get("content", ""))) for token in spec.get("added_tokens") or []
        )
    )


class TokenLookup:
    """Texts → token rows by a model's own tokenizer and ``TokenRules`` (the ``WordLookup`` interface)."""

    def __init__(self, tokenizer: Tokenizer, rules: TokenRules) -> None:
        self.rules = rules
        self.index: dict[str, int] = tokenizer.get_vocab(with_added_tokens=True)
        self._whole = _configured(tokenizer, rules.max_tokens)  # whole texts, with the truncation rule
        self._chunks = _configured(tokenizer, None)  # chunks are never cut: the text is, afterwards
        self._unknown = unknown_id(tokenizer) if rules.drop_unknown else None
        self._chunked = splits_at_whitespace(tokenizer)
        self._cache: dict[str, list[int]] = {}

    def forget(self) -> None:
        """Drop the cached chunks."""
        self._cache = {}

    def _token_ids(self, tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
        """Token ids of ``texts``, the dropped unknown token as ``UNKNOWN``."""
        encodings = tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        unknown = self._unknown
        if unknown is None:
            return [encoding.ids for encoding in encodings]
        return [[UNKNOWN if i == unknown else i for i in encoding.ids] for encoding in encodings]

    def _texts(self, texts: Iterable[str]) -> list[list[int]]:
        texts = list(texts)
        if self.rules.max_chars is not None:
            texts = [text[: self.rules.max_chars] for text in texts]
        if not self._chunked:
            return self._token_ids(self._whole, texts)
        whole = bool(_AMBIGUOUS_SPACE.search("".join(texts)))
        if len(self._cache) > _CACHE_LIMIT:
            self.forget()
        cache, limit = self._cache, self.rules.max_tokens
        out: list[list[int] | None] = []
        missing: set[str] = set()
        for text in texts:
            if whole and _AMBIGUOUS_SPACE.search(text):
                out.append(self._token_ids(self._whole, [text])[0])
                continue
            chunks = text.split()
            try:
                ids = [i for chunk in chunks for i in cache[chunk]]
            except KeyError:
                missing.update(chunk for chunk in chunks if chunk not in cache)
                out.append(None)
                continue
            out.append(ids if limit is None or len(ids) <= limit else ids[:limit])
        if missing:
            new = list(missing)
            cache.update(zip(new, self._token_ids(self._chunks, new), strict=True))
            out = [self._texts([t])[0] if ids is None else ids for t, ids in zip(texts, out, strict=True)]
        return out  # type: ignore[return-value]

    def ids(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Flat token rows (``UNKNOWN`` for a dropped unknown token) and the number of tokens of each text."""
        chunks = self._texts(texts)
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        flat = np.fromiter(itertools.chain.from_iterable(chunks), dtype=np.int64, count=int(lengths.sum()))
        return flat, lengths

    def rows(self, word: str) -> list[int]:
        """The known token rows of ``word`` (several for a word split into pieces)."""
        return [i for i in self._texts([word])[0] if i != UNKNOWN]


def _configured(tokenizer: Tokenizer, max_tokens: int | None) -> Tokenizer:
    """A copy of ``tokenizer`` without padding, truncating to ``max_tokens``."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_padding()
    if max_tokens is None:
        copy.no_truncation()
    else:
        copy.enable_truncation(max_tokens)
    return copy


def check_vocabulary(vocab: Sequence[str], tokenizer: Tokenizer) -> None:
    """A token-level model's rows must be its tokenizer's tokens in id order."""
    by_id = sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))) or [t for t, _ in by_id] != list(vocab):
        raise ModelFormatError(
            f"the tokenizer's {len(by_id)} tokens are not the model's {len(vocab)} rows in id order"
        )
