"""Word splitting and word lookup (METHOD.md §4)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from staticsem.text import UNKNOWN, WordLookup, split_words


def bert_words(text: str) -> list[str]:
    """BertPreTokenizer's pieces without its punctuation tokens."""
    pieces = [piece for piece, _ in BertPreTokenizer().pre_tokenize_str(text)]
    return [p for p in pieces if split_words(p) == [p]]


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "It's the U.S.A.—café «naïve»",
        "3.14 e-mail #tag $5",
        "日本語 テキスト",
        "a_b  c\td\n",
        "",
        "   ",
        "¿Qué? ¡Sí!",
        "“quoted” ‘single’ (paren) [bracket] {brace}",
        "x\u00a0y\u2003z",
    ],
)
def test_split_matches_bert_pre_tokenizer(text: str) -> None:
    assert split_words(text) == bert_words(text)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(categories=["L", "N", "P", "Z", "S", "Mn", "Cc"]), max_size=60))
def test_split_matches_bert_on_random_text(text: str) -> None:
    assert split_words(text) == bert_words(text)


def test_lookup_exact_then_lowercase(subword_tokenizer: Tokenizer) -> None:
    lookup = WordLookup(["Paris", "paris", "cat"], subword_tokenizer)
    assert lookup.resolve("Paris") == 0
    assert lookup.resolve("paris") == 1
    assert lookup.resolve("PARIS") == 1
    assert lookup.resolve("Cat") == 2


def test_lookup_longest_known_prefix(subword_tokenizer: Tokenizer) -> None:
    # "unhappiness" → un ##happi ##ness: "unhappi" is unknown, "un" is known.
    lookup = WordLookup(["un", "house"], subword_tokenizer)
    assert lookup.resolve("unhappiness") == 0
    # "houses" → house ##s: the prefix "house" is used.
    assert lookup.resolve("Houses") == 1
    # the whole word is never used as its own prefix and no prefix is known.
    assert lookup.resolve("dog") == UNKNOWN
    assert WordLookup(["happy"], None).resolve("unhappy") == UNKNOWN


def test_lookup_ids_flat_and_lengths(subword_tokenizer: Tokenizer) -> None:
    lookup = WordLookup(["the", "cat"], subword_tokenizer)
    flat, lengths = lookup.ids(["The cat!", "", "zzz the"])
    assert lengths.tolist() == [2, 0, 2]
    assert flat.tolist() == [0, 1, UNKNOWN, 0]


def test_tables_match_installed_tokenizers_on_every_code_point() -> None:
    """Each character is split as BertPreTokenizer splits it (guards against tokenizers upgrades)."""
    import sys

    from staticsem._punctuation import PUNCTUATION_RANGES, WHITESPACE_RANGES

    def members(ranges: tuple[tuple[int, int], ...]) -> set[int]:
        return {c for a, b in ranges for c in range(a, b + 1)}

    ours = {**dict.fromkeys(members(WHITESPACE_RANGES), 2), **dict.fromkeys(members(PUNCTUATION_RANGES), 3)}
    pre_tokenize = BertPreTokenizer().pre_tokenize_str
    wrong = [
        hex(c)
        for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and len(pre_tokenize(f"a{chr(c)}b")) != ours.get(c, 1)
    ]
    assert wrong == []


def test_containing_span_finds_each_position_s_span_within_its_own_text() -> None:
    from staticsem.text import containing_span

    spans = [[(0, 3), (4, 7)], [], [(2, 5)]]
    rows = np.array([0, 0, 0, 0, 1, 2, 2, 2, 0])
    chars = np.array([0, 3, 6, 7, 1, 1, 2, 4, -1])
    span, flat, owner = containing_span(spans, rows, chars)
    # end is exclusive; text 1 has no span; text 2's character 1 precedes its span; negative is none
    assert span.tolist() == [0, -1, 1, -1, -1, -1, 2, 2, -1]
    assert flat.tolist() == [[0, 3], [4, 7], [2, 5]] and owner.tolist() == [0, 0, 2]


def spans_by_search(spans: list[list[tuple[int, int]]], row: int, char: int) -> int:
    """The flat number of the span of text ``row`` holding ``char``, looked up one by one (-1: none)."""
    before = sum(len(found) for found in spans[:row])
    inside = [n for n, (start, end) in enumerate(spans[row]) if start <= char < end]
    return before + inside[0] if inside and char >= 0 else -1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab .,!?", max_size=12), min_size=1, max_size=6), st.randoms())
def test_containing_span_of_every_position_of_texts_of_several_lengths(texts: list[str], rng: Any) -> None:
    """Every character position of texts of several lengths (one past each text's end too, and -1), in any
    order: a text's last tokens being punctuation (past its last word) must not reach the next text's
    first word, nor the longest text's positions go past the others'."""
    from staticsem.text import WordSplitter, containing_span

    spans = [WordSplitter().spans(text) for text in texts]
    positions = [(row, char) for row, text in enumerate(texts) for char in range(-1, len(text) + 1)]
    rng.shuffle(positions)
    rows, chars = np.array([p[0] for p in positions]), np.array([p[1] for p in positions])
    span, flat, owner = containing_span(spans, rows, chars)
    assert span.tolist() == [spans_by_search(spans, row, char) for row, char in positions]
    assert flat.tolist() == [list(pair) for found in spans for pair in found]
    assert owner.tolist() == [row for row, found in enumerate(spans) for _ in found]


def test_a_word_s_tokens_stop_at_its_text_s_end_when_punctuation_closes_the_longest_text(
    subword_tokenizer: Tokenizer,
) -> None:
    """The reduction's occurrences (``batches.occurrences``): the full stop ending the longest text of a
    batch is no token of the next text's first word; each occurrence holds its own word's tokens only."""
    from staticsem.distillation.teachers.batches import occurrences
    from staticsem.text import WordSplitter

    texts = ["the cat sat on the mat ...", "cat", "dog.", "the dog ran!"]
    encodings = subword_tokenizer.encode_batch(texts, add_special_tokens=False)
    width = max(len(e.ids) for e in encodings)
    offsets, own = np.zeros((len(texts), width, 2), np.int64), np.zeros((len(texts), width), bool)
    for b, encoding in enumerate(encodings):
        offsets[b, : len(encoding.ids)] = encoding.offsets
        own[b, : len(encoding.ids)] = True
    index = {"the": 0, "cat": 1, "dog": 2, "ran": 3}
    positions, occurrence, words = occurrences(texts, offsets, own, index, True, WordSplitter())
    tokens = [
        [texts[p // width][slice(*offsets[p // width, p % width])] for p in positions[occurrence == n]]
        for n in range(len(words))
    ]
    names = list(index)
    assert [names[w] for w in words.tolist()] == ["the", "cat", "the", "cat", "dog", "the", "dog", "ran"]
    assert tokens == [["the"], ["cat"], ["the"], ["cat"], ["dog"], ["the"], ["dog"], ["ran"]]


def test_overlapping_span_gives_a_token_the_first_word_it_covers() -> None:
    from staticsem.text import overlapping_span, word_pattern

    texts = ['"Music" (loudly) ok', "the judge's x", "", "a b"]
    spans = [[m.span() for m in word_pattern().finditer(t)] for t in texts]
    # tokens as [start, end): "M ; "(l" ; the lone space before "ok" kept empty at "o" ; ") " ;
    # "judge's" (two words: the first) ; a token past the text ; an empty text's ; "a" ; a space between a, b
    rows = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3])
    starts = np.array([0, 8, 17, 15, 4, 20, 0, 0, 2])
    ends = np.array([2, 10, 17, 17, 11, 21, 0, 1, 2])
    span, flat, owner = overlapping_span(spans, rows, starts, ends)
    words = [texts[owner[s]][slice(*flat[s])] if s >= 0 else None for s in span.tolist()]
    assert words == ["Music", "loudly", "ok", None, "judge", None, None, "a", "b"]
