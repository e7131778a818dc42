"""Pluggable word splitting: unspaced scripts (Chinese, Japanese, Thai...) split into subword pieces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from staticsem import StaticModel, load
from staticsem.distillation.corpus.sampling import count_words
from staticsem.distillation.methods.swe.pipeline import SWESettings
from staticsem.distillation.teachers.batches import occurrences as _occurrences
from staticsem.errors import InputError, ModelFormatError
from staticsem.text import SPLITTERS, SubwordSplitter, WordSplitter, make_splitter, register_splitter

PIECES = [
    "[UNK]",
    "我",
    "喜欢",
    "猫",
    "##喜欢",
    "##猫",
    "##我",
    "東京",
    "##に",
    "に",
    "行く",
    "##行く",
    "cat",
    "##s",
]


@pytest.fixture()
def pieces() -> Tokenizer:
    """A WordPiece tokenizer knowing a few Chinese and Japanese pieces (greedy longest match)."""
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(PIECES)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


def test_subword_splitter_cuts_only_unspaced_runs(pieces: Tokenizer) -> None:
    splitter = SubwordSplitter(pieces)
    assert splitter.words("我喜欢猫, cats 東京に行く!") == ["我", "喜欢", "猫", "cats", "東京", "に", "行く"]
    text = "I said 我喜欢猫."
    assert [text[a:b] for a, b in splitter.spans(text)] == ["I", "said", "我", "喜欢", "猫"]
    assert splitter.words("abc我def") == ["abc", "我", "def"]  # a mixed run keeps its Latin parts whole
    assert WordSplitter().words("我喜欢猫, cats") == ["我喜欢猫", "cats"]


def test_registry(pieces: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown word splitter 'jieba'"):
        make_splitter("jieba", pieces)
    with pytest.raises(ValueError, match="needs a subword tokenizer"):
        make_splitter("subword")

    class Characters(WordSplitter):
        name = "chars"

        def spans(self, text: str) -> list[tuple[int, int]]:
            return [(i, i + 1) for i, c in enumerate(text) if not c.isspace()]

        def words(self, text: str) -> list[str]:
            return [text[a:b] for a, b in self.spans(text)]

    monkeypatch.setattr("staticsem.text.SPLITTERS", dict(SPLITTERS))  # the registry is restored afterwards
    register_splitter("chars", lambda tokenizer: Characters())
    model = StaticModel(["a", "b"], np.eye(2, dtype=np.float32), splitter="chars")
    np.testing.assert_allclose(model.encode(["ab"])[0], np.array([1, 1]) / np.sqrt(2), rtol=1e-6)
    with pytest.raises(ModelFormatError, match="unknown word splitter"):
        StaticModel(["a"], np.ones((1, 2), np.float32), splitter="nope")
    with pytest.raises(InputError, match="unknown word splitter 'nope'"):
        SWESettings(corpus=("embedded",), splitter="nope").validate()


def test_model_encodes_chinese_by_pieces_and_keeps_its_splitter(pieces: Tokenizer, tmp_path: Path) -> None:
    vectors = np.eye(3, dtype=np.float32)
    model = StaticModel(["我", "喜欢", "猫"], vectors, tokenizer=pieces, splitter="subword")
    np.testing.assert_allclose(model.encode(["我喜欢猫"])[0], np.ones(3) / np.sqrt(3), rtol=1e-6)
    plain = StaticModel(["我", "喜欢", "猫"], vectors, tokenizer=pieces)
    np.testing.assert_allclose(
        plain.encode(["我喜欢猫"])[0], [1, 0, 0]
    )  # the whole run: its first piece only
    model.save(tmp_path / "zh")
    again = load(tmp_path / "zh")
    assert again.splitter.name == "subword"
    np.testing.assert_allclose(again.encode(["我喜欢猫"]), model.encode(["我喜欢猫"]), atol=1e-3)
    plain.save(tmp_path / "plain")
    assert "word_splitter" not in (tmp_path / "plain" / "config.json").read_text()


def test_counting_and_extraction_see_pieces_as_words(pieces: Tokenizer) -> None:
    splitter = SubwordSplitter(pieces)
    counts, total = count_words(["我喜欢猫", "猫喜欢我", "cats"], False, False, splitter.words)
    assert total == 3 and counts == {"我": 2, "喜欢": 2, "猫": 2, "cats": 1}
    text = "我喜欢猫"
    offsets = np.array([[[0, 0], [0, 1], [1, 3], [3, 4], [0, 0]]])  # one teacher token per piece
    own = np.array([[False, True, True, True, False]])
    index = {"猫": 0, "喜欢": 1}
    positions, occurrence, words = _occurrences([text], offsets, own, index, False, splitter)
    assert positions.tolist() == [2, 3] and words.tolist() == [1, 0] and occurrence.tolist() == [0, 1]
    _, _, whole = _occurrences([text], offsets, own, index, False, WordSplitter())
    assert whole.tolist() == []  # without the splitter the run is one unknown word


def test_length_limits_count_unspaced_characters(tmp_path: Path) -> None:
    from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
    from staticsem.text import word_count

    assert word_count("我喜欢猫, cats and dogs") == 4 + 3
    assert word_count("two words") == 2
    corpus = tmp_path / "zh.txt"
    corpus.write_text("我喜欢猫。\n猫。\n", encoding="utf-8")
    assert list(iter_sentences([str(corpus)], CorpusOptions(min_words=3))) == ["我喜欢猫。"]
