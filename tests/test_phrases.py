"""Phrase rows at encode time (``staticsem.phrases``): matched longest-first, left to right, only across
whitespace, counted once (in place of their words or beside them), kept by the model folder and in every
mode, and dropped with one line by the formats that have no phrases."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

import staticsem
from fakes import corpus_tokenizer
from staticsem import StaticModel
from staticsem.errors import ModelFormatError
from staticsem.io import export
from staticsem.phrases import PhraseTable, is_phrase

WORDS = ["new", "york", "city", "is", "big", "the", "heart", "attack", "a", "b", "c", "d"]
PHRASES = ["new york", "new york city", "york city", "heart attack", "a b", "b c", "b c d"]


def phrase_model(mode: str, **extra: object) -> StaticModel:
    vocab = WORDS + PHRASES
    vectors = np.random.default_rng(3).normal(size=(len(vocab), 8)).astype(np.float32)
    return StaticModel(vocab, vectors, phrases=mode, **extra)  # type: ignore[arg-type]


def entries(model: StaticModel, text: str) -> list[str]:
    """The vocabulary entries ``encode`` averages for ``text``, in order."""
    flat, _ = model.row_ids([text])
    return [model.vocab[i] for i in flat]


def by_hand(model: StaticModel, *rows: str) -> np.ndarray:
    mean = np.mean([model.vectors[model.vocab.index(r)] for r in rows], axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


# ---------------------------------------------------------------- matching
MATCHES = [
    ("new york city is big", ["new york city", "is", "big"]),  # the longest phrase at a word wins
    ("new york is big", ["new york", "is", "big"]),
    ("the new york heart attack", ["the", "new york", "heart attack"]),
    ("a b c d", ["a b", "c", "d"]),  # left to right: "a b" first, so neither "b c" nor "b c d"
    ("c b c d", ["c", "b c d"]),  # the longest of those starting at "b"
    ("the york city new york", ["the", "york city", "new york"]),
    ("new  york\tcity", ["new york city"]),  # any whitespace between the words
    ("York, New city", ["york", "new", "city"]),  # punctuation breaks a phrase
    ("new-york city", ["new", "york city"]),
    ("new york. city", ["new york", "city"]),
    ("New York City", ["new york city"]),  # as the words' rows: "New" is "new" here
    ("new york zzz city", ["new york", "city"]),  # an unknown word breaks it
]


@pytest.mark.parametrize(("text", "want"), MATCHES)
def test_phrases_are_matched_longest_first_left_to_right_across_whitespace_only(
    text: str, want: list[str]
) -> None:
    assert entries(phrase_model("replace"), text) == want


@pytest.mark.parametrize("splitter", ["subword", "greedy"])
def test_the_splitters_for_unspaced_scripts_match_spaced_words_alike(tmp_path: Path, splitter: str) -> None:
    # a cross-lingual build with zh or ja reads its English through these splitters: the same phrases,
    # found by looking at the text between the words instead of the word pattern's links
    words = tmp_path / "words.txt"
    words.write_text(" ".join(WORDS) + " 東京大学\n", encoding="utf-8")
    model = phrase_model("replace", splitter=splitter, tokenizer=corpus_tokenizer(words))
    assert [entries(model, text) for text, _ in MATCHES] == [want for _, want in MATCHES]


def test_a_phrase_follows_the_rows_its_words_resolve_to() -> None:
    vocab = ["new", "New", "york", "new york"]  # a cased vocabulary: "New" has a row of its own
    model = StaticModel(vocab, np.eye(4, dtype=np.float32), phrases="replace")
    assert entries(model, "new york") == ["new york"]
    assert entries(model, "New york") == ["New", "york"]


def test_phrases_never_cross_texts() -> None:
    model = phrase_model("replace")
    flat, lengths = model.row_ids(["it is new", "york is big", "heart", "attack"])
    assert [model.vocab[i] for i in flat] == ["is", "new", "york", "is", "big", "heart", "attack"]
    assert lengths.tolist() == [2, 3, 1, 1]


def test_add_keeps_the_words_and_adds_each_phrase_once() -> None:
    model = phrase_model("add")
    assert entries(model, "new york city is big") == ["new", "york", "city", "new york city", "is", "big"]
    assert entries(model, "a b c d") == ["a", "b", "a b", "c", "d"]
    np.testing.assert_allclose(
        model.encode("the heart attack"), by_hand(model, "the", "heart", "attack", "heart attack"), atol=1e-6
    )


def test_replace_counts_the_phrase_row_instead_of_its_words() -> None:
    model = phrase_model("replace")
    np.testing.assert_allclose(
        model.encode("the heart attack"), by_hand(model, "the", "heart attack"), atol=1e-6
    )
    plain = StaticModel(WORDS, model.vectors[: len(WORDS)])
    assert not np.allclose(model.encode("the heart attack"), plain.encode("the heart attack"))


def test_encoding_a_batch_equals_encoding_each_text_alone() -> None:
    texts = ["new york city is big", "York, New city", "a b c d", "", "heart attack heart attack", "zzz"]
    for mode in ("add", "replace"):
        model = phrase_model(mode)
        whole = model.encode(texts, batch_size=4)
        alone = np.stack([model.encode(t) for t in texts])
        np.testing.assert_allclose(whole, alone, atol=1e-6)


def test_table_refuses_phrases_it_cannot_key() -> None:
    with pytest.raises(ValueError, match="2-3"):
        PhraseTable([[0, 1, 2, 3]], [4], 5)
    with pytest.raises(ValueError, match="below"):
        PhraseTable([[0, 7]], [4], 5)


def test_an_entry_is_a_phrase_only_if_single_spaces_join_words() -> None:
    assert is_phrase("new york") and is_phrase("new york city")
    assert not any(is_phrase(e) for e in ["york", " lead", "new  york", "tab\tword", "line\nbreak", "end "])


def test_a_phrase_whose_word_has_no_row_never_matches() -> None:
    model = StaticModel(["new", "york", "new jersey"], np.eye(3, dtype=np.float32), phrases="replace")
    assert model._lookup.unmatched_phrases == 1
    assert entries(model, "new jersey") == ["new"]


def test_an_unknown_phrase_mode_is_refused() -> None:
    with pytest.raises(ModelFormatError, match="phrase mode"):
        phrase_model("both")


# ---------------------------------------------------------------- where the model goes
@pytest.mark.parametrize("mode", ["add", "replace"])
def test_the_folder_records_its_phrases_and_mode(tmp_path: Path, mode: str) -> None:
    model = phrase_model(mode)
    model.save(tmp_path / "m", dtype="float32")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["phrases"] == {"mode": mode, "count": len(PHRASES)}
    loaded = staticsem.load(tmp_path / "m")
    assert loaded.phrases == PHRASES and loaded.phrase_mode == mode
    texts = ["new york city is big", "the heart attack"]
    np.testing.assert_array_equal(loaded.encode(texts), model.encode(texts))


def test_modes_truncation_and_int8_keep_the_phrases(tmp_path: Path) -> None:
    model = phrase_model("replace")
    text = "the heart attack"
    assert model.for_mode("query").encode(text) @ model.encode(text) > 0.9999
    assert entries(model.truncate(4), text) == ["the", "heart attack"]
    model.save(tmp_path / "q", dtype="int8")
    assert entries(staticsem.load(tmp_path / "q"), text) == ["the", "heart attack"]


def test_a_bad_phrases_record_is_refused(tmp_path: Path) -> None:
    phrase_model("add").save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["phrases"] = {"mode": 3}
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFormatError, match="'phrases'"):
        staticsem.load(tmp_path / "m")


@pytest.mark.parametrize(
    "fmt", ["word2vec", "word2vec-binary", "glove", "fasttext", "model2vec", "sentence-transformers"]
)
def test_formats_without_phrases_keep_the_words_and_say_how_many_were_dropped(
    tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = phrase_model("add")
    with caplog.at_level(logging.WARNING):
        export(model, tmp_path / "out", fmt)
    said = [r.getMessage() for r in caplog.records if "phrases" in r.getMessage()]
    assert said == [f"{fmt} has no phrases: {len(PHRASES)} phrases dropped, the words kept"]
    back = staticsem.load(tmp_path / "out")
    words = [w for w in back.vocab if w != "[UNK]"]
    assert sorted(words) == sorted(WORDS)
    assert not back.phrases


def test_the_staticsem_format_keeps_phrases_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        export(phrase_model("add"), tmp_path / "out")
    assert not caplog.records
    assert staticsem.load(tmp_path / "out").phrases == PHRASES


def test_without_phrases_keeps_every_word_row_and_its_vector() -> None:
    model = phrase_model("add")
    words = model.without_phrases()
    assert words.vocab == WORDS
    np.testing.assert_array_equal(words.vectors, model.vectors[: len(WORDS)])
    assert words.phrases == [] and model.without_phrases().encode("zzz").shape == (8,)


def test_without_phrases_keeps_an_int8_row_set_matched_to_its_words() -> None:
    from staticsem.modes import RowSet

    model = phrase_model("add")
    rows = RowSet(np.random.default_rng(5).normal(size=model.vectors.shape).astype(np.float32)).quantized()
    words = model.with_row_set("search", rows).with_modes(query={"rows": "search"}).without_phrases()
    kept = words.row_sets["search"]
    assert kept.scales is not None and rows.scales is not None
    np.testing.assert_array_equal(kept.vectors, rows.vectors[: len(WORDS)])
    np.testing.assert_array_equal(kept.scales, rows.scales[: len(WORDS)])


def test_info_counts_the_phrases_and_says_how_they_count(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from staticsem.cli import app

    for mode, how in (("add", "beside their words' rows"), ("replace", "in place of their words' rows")):
        phrase_model(mode).save(tmp_path / mode)
        shown = CliRunner().invoke(app, ["info", str(tmp_path / mode)], env={"COLUMNS": "200"}).stdout
        assert f"{len(PHRASES)} ({mode}: each found phrase's row counts {how})" in shown
    StaticModel(WORDS, np.eye(len(WORDS), dtype=np.float32)).save(tmp_path / "none")
    shown = CliRunner().invoke(app, ["info", str(tmp_path / "none")], env={"COLUMNS": "200"}).stdout
    (row,) = [line for line in shown.splitlines() if " phrases " in line]
    assert row.split()[1:4] == ["phrases", "│", "none"]


def test_a_phrase_right_after_another_is_found_too() -> None:
    vocab = ["a", "b", "c", "d", "a b", "b c", "c d"]  # "b c" overlaps both: matched phrases may abut
    model = StaticModel(vocab, np.eye(7, dtype=np.float32), phrases="replace")
    assert entries(model, "a b c d") == ["a b", "c d"]
    assert entries(model, "a b a b") == ["a b", "a b"]
    assert entries(model, "b c d a b") == ["b c", "d", "a b"]


@pytest.mark.parametrize("mode", ["add", "replace"])
def test_no_phrase_across_a_comma_with_spaces_or_from_one_text_into_the_next(mode: str) -> None:
    model = phrase_model(mode)
    assert "new york" not in entries(model, "new , york") and "new york" not in entries(model, "new ,york")
    flat, lengths = model.row_ids(["it is new ", "york city", "heart\t", " attack"])
    assert [model.vocab[i] for i in flat[: lengths[0]]] == ["is", "new"]
    assert "new york" not in [model.vocab[i] for i in flat] and "heart attack" not in [
        model.vocab[i] for i in flat
    ]


def test_a_word_found_by_its_subword_prefix_breaks_a_phrase(subword_tokenizer: Tokenizer) -> None:
    """ "houses" is "house" by the longest-prefix fallback: a row, but not its own, so no phrase (stage 1 and
    the corpus counts never see one there either)."""
    vocab = ["the", "house", "cat", "the house", "house cat"]
    model = StaticModel(vocab, np.eye(5, dtype=np.float32), tokenizer=subword_tokenizer, phrases="replace")
    assert entries(model, "the house cat") == ["the house", "cat"]
    assert entries(model, "the houses cat") == ["the", "house", "cat"]  # "houses" → the row of "house"
    assert entries(model, "houses cat") == ["house", "cat"]


def test_the_search_modes_keep_the_phrase_mode() -> None:
    from staticsem.modes import RowSet

    model = phrase_model("replace")
    rows = RowSet(-model.vectors)  # the query mode's own rows
    moded = model.with_row_set("search", rows).with_modes(
        query={"rows": "search"}, document={"rows": "search"}
    )
    query = moded.for_mode("query")
    assert query.phrase_mode == "replace" and entries(query, "the heart attack") == ["the", "heart attack"]
    np.testing.assert_allclose(
        moded.encode_query("the heart attack"), -by_hand(model, "the", "heart attack"), atol=1e-6
    )


def test_an_int8_model_exports_its_words_rows_without_the_phrases_between_them(tmp_path: Path) -> None:
    vocab = ["new", "new york", "york", "heart attack", "heart", "attack"]  # phrases between the words
    rng = np.random.default_rng(5)
    model = StaticModel(vocab, rng.normal(size=(6, 4)).astype(np.float32), phrases="add")
    model.save(tmp_path / "q", dtype="int8")
    quantised = staticsem.load(tmp_path / "q")
    export(quantised, tmp_path / "v.txt", "word2vec")
    back = staticsem.load(tmp_path / "v.txt")
    assert back.vocab == ["new", "york", "heart", "attack"]
    for word in back.vocab:
        np.testing.assert_allclose(back.word_vector(word), quantised.word_vector(word), atol=1e-5)
