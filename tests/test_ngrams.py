"""fastText n-gram vectors at inference: hashing vs gensim, unknown words, the native format."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from gensim.models.fasttext import FastTextKeyedVectors, ft_ngram_hashes
from gensim.models.fasttext_inner import compute_ngrams_bytes, ft_hash_bytes
from safetensors.numpy import load_file, save_file

import staticsem
from staticsem import StaticModel
from staticsem.errors import InputError, ModelFormatError
from staticsem.io import export
from staticsem.ngrams import NgramTable, char_ngrams, ft_hash

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "running", "house"]
ODD_WORDS = ["cat", "a", "aaaa", "café", "Straße", "日本", "日本語", "👍🏽", "x👍y", "naïveté"]
DIM, BUCKETS = 8, 997


def ngram_table(minn: int = 3, maxn: int = 6, lowercase: bool = False, seed: int = 3) -> NgramTable:
    rng = np.random.default_rng(seed)
    return NgramTable(rng.normal(size=(BUCKETS, DIM)).astype(np.float32), minn, maxn, lowercase)


@pytest.fixture()
def ft_model() -> StaticModel:
    """Random word rows for ``WORDS`` plus a random lower-casing n-gram table."""
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(len(WORDS), DIM)).astype(np.float32)
    return StaticModel(WORDS, vectors, ngrams=ngram_table(lowercase=True), metadata={"method": "fasttext"})


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


# ---------------------------------------------------------------- hashing and n-grams vs gensim
@pytest.mark.parametrize("word", ODD_WORDS)
@pytest.mark.parametrize(("minn", "maxn"), [(3, 6), (1, 3), (2, 2), (5, 5)])
def test_ngrams_and_buckets_equal_gensims(word: str, minn: int, maxn: int) -> None:
    assert char_ngrams(word, minn, maxn) == [
        g.decode("utf-8") for g in compute_ngrams_bytes(word, minn, maxn)
    ]
    table = ngram_table(minn, maxn)
    assert table.bucket_ids(word).tolist() == ft_ngram_hashes(word, minn, maxn, BUCKETS)


@pytest.mark.parametrize(
    "data", [b"", b"<ca", "é>".encode(), "日本".encode(), "👍".encode(), bytes(range(256))]
)
def test_hash_equals_gensims_signed_byte_fnv1a(data: bytes) -> None:
    assert ft_hash(data) == ft_hash_bytes(data)


@pytest.mark.parametrize("word", ["dogs", "cafés", "日本", "x👍y", "Unseenword"])
def test_unknown_word_vector_equals_gensims(word: str) -> None:
    table = ngram_table()
    keyed = FastTextKeyedVectors(DIM, table.minn, table.maxn, BUCKETS)
    keyed.vectors_ngrams = table.vectors.copy()
    vector = table.vector(word)
    assert vector is not None and vector.dtype == np.float32
    np.testing.assert_allclose(vector, keyed.get_vector(word), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- StaticModel with an n-gram table
def test_encode_uses_ngram_vectors_for_unknown_words(ft_model: StaticModel) -> None:
    table = ft_model.ngrams
    assert table is not None
    composed = [table.vector(w) for w in ("dogs", "catty")]
    expected = unit(ft_model.word_vector("the") + composed[0] + composed[1])
    got = ft_model.encode(["The dogs, catty!", "the cat"])
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)
    plain = StaticModel(ft_model.vocab, ft_model.vectors)
    np.testing.assert_array_equal(got[1], plain.encode(["the cat"])[0])


def test_unknown_words_use_lower_case_ngrams_when_the_table_does(ft_model: StaticModel) -> None:
    np.testing.assert_array_equal(ft_model.word_vector("DOGS"), ft_model.word_vector("dogs"))
    cased = StaticModel(WORDS, ft_model.vectors, ngrams=ngram_table(lowercase=False))
    assert not np.allclose(cased.word_vector("DOGS"), cased.word_vector("dogs"))


def test_word_without_ngram_stays_unknown() -> None:
    model = StaticModel(WORDS, np.ones((len(WORDS), DIM), np.float32), ngrams=ngram_table(5, 6))
    assert not model.encode(["a b"]).any()  # "<a>" is shorter than minn=5
    with pytest.raises(InputError, match="not in the vocabulary"):
        model.word_vector("a")


def test_many_unknown_words_grow_the_composed_rows(ft_model: StaticModel) -> None:
    words = [f"zork{i}" for i in range(100)]
    got = ft_model.encode(words, batch_size=7)
    table = ft_model.ngrams
    assert table is not None
    expected = np.stack([unit(v) for w in words if (v := table.vector(w)) is not None])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ft_model.encode(words, batch_size=7), got)  # cached rows, same result


def test_composed_rows_are_dropped_past_the_limit(
    ft_model: StaticModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["the zork1", "zork2 cat", "zork1 zork3", "mat"]
    expected = ft_model.encode(texts)
    monkeypatch.setattr("staticsem.model._COMPOSED_BYTES", 0)
    np.testing.assert_allclose(ft_model.encode(texts, batch_size=1), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ft_model.encode(texts, batch_size=1), expected, rtol=1e-6, atol=1e-7)


def test_workers_give_the_same_array_with_unknown_words(ft_model: StaticModel) -> None:
    texts = [f"the zork{i} cat blurb{i % 7}" for i in range(40)]
    one = ft_model.encode(texts, batch_size=8)
    two = ft_model.encode(texts, batch_size=8, workers=2)
    np.testing.assert_array_equal(one, two)


def test_word_operations_on_unknown_words(ft_model: StaticModel) -> None:
    assert "dogs" not in ft_model
    with pytest.raises(InputError, match="n-gram vector only"):
        ft_model.word_index("dogs")
    vector = ft_model.word_vector("dogs")
    neighbours = ft_model.most_similar("dogs", k=3)
    assert neighbours == ft_model.most_similar(vector, k=3)
    assert all(word in WORDS for word, _ in neighbours)
    answers = ft_model.analogy("cat", "dogs", "mat", k=len(WORDS))
    assert {w for w, _ in answers} == set(WORDS) - {"cat", "mat"}
    assert ft_model.similarity("dogs", "the dogs") == pytest.approx(
        float(unit(vector) @ unit(vector + ft_model.word_vector("the")))
    )


def test_truncate_cuts_the_ngram_table(ft_model: StaticModel) -> None:
    small = ft_model.truncate(3)
    assert small.ngrams is not None and small.ngrams.vectors.shape == (BUCKETS, 3)
    np.testing.assert_allclose(small.word_vector("dogs"), ft_model.word_vector("dogs")[:3], rtol=1e-6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vectors": np.full((4, DIM), np.nan, np.float32)}, "NaN"),
        ({"vectors": np.zeros((4, DIM), np.int8)}, "float32 or float16"),
        ({"vectors": np.zeros((0, DIM), np.float32)}, "non-empty"),
        ({"minn": 4, "maxn": 3}, "minn <= maxn"),
        ({"minn": 0}, "minn <= maxn"),
    ],
)
def test_bad_ngram_tables_are_format_errors(change: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"vectors": np.zeros((4, DIM), np.float32), "minn": 3, "maxn": 6, **change}
    with pytest.raises(ModelFormatError, match=message):
        NgramTable(**settings)  # type: ignore[arg-type]


def test_ngram_table_must_match_the_matrix_width() -> None:
    with pytest.raises(ModelFormatError, match="n-gram table has 8 dimensions but the matrix has 4"):
        StaticModel(WORDS, np.ones((len(WORDS), 4), np.float32), ngrams=ngram_table())


# ---------------------------------------------------------------- native format and exports
@pytest.mark.parametrize(
    ("dtype", "table_dtype"), [("float32", "float32"), ("float16", "float16"), ("int8", "float16")]
)
def test_native_round_trip_keeps_the_ngram_table(
    ft_model: StaticModel, tmp_path: Path, dtype: str, table_dtype: str
) -> None:
    path = ft_model.save(tmp_path / "ft", dtype=dtype)
    config = json.loads((path / "config.json").read_text())
    assert config["subwords"] == {
        "type": "fasttext",
        "minn": 3,
        "maxn": 6,
        "buckets": BUCKETS,
        "lowercase": True,
    }
    loaded = staticsem.load(path)
    assert loaded.ngrams is not None and ft_model.ngrams is not None
    assert str(loaded.ngrams.vectors.dtype) == table_dtype
    assert (loaded.ngrams.minn, loaded.ngrams.maxn, loaded.ngrams.lowercase) == (3, 6, True)
    tol = 1e-7 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(loaded.ngrams.vectors, ft_model.ngrams.vectors, rtol=tol, atol=tol)
    texts = ["the dogs sat", "Zorkish catty"]
    np.testing.assert_allclose(loaded.encode(texts), ft_model.encode(texts), rtol=0, atol=tol)
    assert staticsem.load(path, dim=4).ngrams.vectors.shape == (BUCKETS, 4)  # type: ignore[union-attr]


def _rewrite(path: Path, config_change: dict[str, object] | None = None, drop_tensor: bool = False) -> None:
    if config_change is not None:
        config = json.loads((path / "config.json").read_text())
        config.update(config_change)
        (path / "config.json").write_text(json.dumps(config))
    if drop_tensor:
        tensors = load_file(str(path / "model.safetensors"))
        del tensors["ngrams"]
        save_file(tensors, str(path / "model.safetensors"))


@pytest.mark.parametrize(
    ("config_change", "drop_tensor", "message"),
    [
        ({"subwords": {"type": "fasttext", "minn": 3, "maxn": 6, "buckets": 5}}, False, "announces 5 n-gram"),
        ({"subwords": {"type": "bpe"}}, False, "type 'fasttext'"),
        ({"subwords": {"type": "fasttext", "minn": 7, "maxn": 6, "buckets": BUCKETS}}, False, "minn <= maxn"),
        ({"subwords": {"type": "fasttext", "minn": "3", "maxn": 6, "buckets": BUCKETS}}, False, "integer"),
        (None, True, "no 'ngrams' tensor"),
        ({"subwords": None}, False, "'subwords' must be"),
    ],
)
def test_inconsistent_ngram_files_are_format_errors(
    ft_model: StaticModel,
    tmp_path: Path,
    config_change: dict[str, object] | None,
    drop_tensor: bool,
    message: str,
) -> None:
    path = ft_model.save(tmp_path / "ft", dtype="float32")
    _rewrite(path, config_change, drop_tensor)
    with pytest.raises(ModelFormatError, match=message) as error:
        staticsem.load(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


@pytest.mark.parametrize("fmt", ["word2vec", "glove", "fasttext", "model2vec", "sentence-transformers"])
def test_exports_drop_the_ngrams_with_one_warning(
    ft_model: StaticModel, tmp_path: Path, fmt: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="staticsem"):
        path = export(
            ft_model, tmp_path / ("out.vec" if fmt in ("word2vec", "glove", "fasttext") else "out"), fmt
        )
    warnings = [r for r in caplog.records if "n-gram" in r.getMessage()]
    assert len(warnings) == 1
    back = staticsem.load(path)
    assert back.ngrams is None and back.vocab == ft_model.vocab


def test_cli_info_and_neighbours_of_an_unknown_word(ft_model: StaticModel, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from staticsem.cli import app

    path = ft_model.save(tmp_path / "ft")
    info = CliRunner().invoke(app, ["info", str(path)])
    assert info.exit_code == 0 and "fastText n-grams (3-6 chars, 997 buckets)" in info.stdout
    neighbours = CliRunner().invoke(app, ["neighbors", str(path), "dogs", "-k", "2"])
    assert neighbours.exit_code == 0, neighbours.stderr
    assert all(word in neighbours.stdout for word, _ in staticsem.load(path).most_similar("dogs", 2))
