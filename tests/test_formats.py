"""Round trips through every format, checked against gensim, model2vec and sentence-transformers."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import gensim.models
import model2vec
import model2vec.model
import model2vec.quantization
import numpy as np
import pytest
import sentence_transformers
from tokenizers import Tokenizer, models, pre_tokenizers

import staticsem
from staticsem import StaticModel
from staticsem.errors import InputError
from staticsem.io import Format, detect, export
from staticsem.quantize import dequantize

TEXTS = [
    "the cat sat on the mat",
    "a happy dog ran home",
    "Paris, France!",
    "the king and the queen",
    "unhappiness in houses",
]
# In-vocabulary texts of ``lower_model`` (punctuation and mixed case are fine, unknown words are not).
LOWER_TEXTS = [
    "The cat sat on the mat.",
    "A HAPPY dog ran!",
    "Paris, France; the King & the Queen?",
    "(man) woman... un-happy house",
    "sat",
]


def full(model: StaticModel) -> np.ndarray:
    return dequantize(model.vectors, model.scales)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / norms


def as_dict(words: list[str], matrix: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(words, np.asarray(matrix, dtype=np.float32), strict=True))


def assert_same_vectors(
    left: dict[str, np.ndarray], right: dict[str, np.ndarray], exact: bool = False
) -> None:
    assert list(left) == list(right)
    for word, vector in left.items():
        if exact:
            np.testing.assert_array_equal(vector, right[word], err_msg=word)
        else:
            np.testing.assert_allclose(vector, right[word], rtol=1e-6, atol=1e-7, err_msg=word)


def word_level(words: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


# ---------------------------------------------------------------- staticsem folder
@pytest.mark.parametrize(
    ("dtype", "scale"), [("float32", "row"), ("float16", "row"), ("int8", "row"), ("int8", "model")]
)
def test_native_round_trip(tiny_model: StaticModel, tmp_path: Path, dtype: str, scale: str) -> None:
    loaded = staticsem.load(tiny_model.save(tmp_path / "m", dtype=dtype, scale=scale))
    assert loaded.dtype == dtype
    assert loaded.vocab == tiny_model.vocab
    assert loaded.metadata == tiny_model.metadata
    assert loaded.tokenizer is not None and tiny_model.tokenizer is not None
    assert loaded.tokenizer.to_str() == tiny_model.tokenizer.to_str()
    if dtype == "float32":
        np.testing.assert_array_equal(loaded.vectors, tiny_model.vectors)
    elif dtype == "float16":
        np.testing.assert_allclose(full(loaded), tiny_model.vectors, rtol=1e-3, atol=1e-3)
    else:
        assert loaded.scales is not None and loaded.scales.shape == (len(tiny_model),)
        assert (row_cosines(full(loaded), tiny_model.vectors) >= 0.99).all()
    ours, theirs = tiny_model.encode(TEXTS), loaded.encode(TEXTS)
    assert (row_cosines(ours, theirs) >= 0.99).all()
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, rtol=1e-5)
    assert loaded.word_index("unhappiness") == tiny_model.word_index("un")  # subword fallback survives


def test_resaving_int8_keeps_the_stored_values(tiny_model: StaticModel, tmp_path: Path) -> None:
    first = staticsem.load(tiny_model.save(tmp_path / "a", dtype="int8"))
    second = staticsem.load(first.save(tmp_path / "b", dtype="int8"))
    np.testing.assert_array_equal(second.vectors, first.vectors)
    assert first.scales is not None
    np.testing.assert_array_equal(second.scales, first.scales)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("dim", [1, 5, 16])
def test_load_with_dim_keeps_the_first_columns(
    tiny_model: StaticModel, tmp_path: Path, dtype: str, dim: int
) -> None:
    path = tiny_model.save(tmp_path / "m", dtype=dtype)
    whole = staticsem.load(path)
    cut = staticsem.load(path, dim=dim)
    assert cut.dim == dim and cut.vocab == whole.vocab
    np.testing.assert_array_equal(full(cut), full(whole)[:, :dim])
    assert cut.tokenizer is not None


def test_load_with_too_many_dims_is_an_input_error(saved_model: Path) -> None:
    with pytest.raises(InputError, match="16"):
        staticsem.load(saved_model, dim=17)


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"dtype": "float64"}, "dtype"),
        ({"dtype": "int4"}, "dtype"),
        ({"dtype": "int8", "scale": "column"}, "scale"),
    ],
)
def test_bad_save_options_are_input_errors(
    tiny_model: StaticModel, tmp_path: Path, options: dict[str, str], pattern: str
) -> None:
    with pytest.raises(InputError, match=pattern):
        tiny_model.save(tmp_path / "m", **options)
    assert not (tmp_path / "m").exists()


def test_float16_overflow_is_refused_not_saved_as_inf(tmp_path: Path) -> None:
    model = StaticModel(["big", "small"], np.array([[1e5, 1.0], [0.5, 0.25]], np.float32))
    with pytest.raises(InputError, match="float16"):
        model.save(tmp_path / "m", dtype="float16")
    np.testing.assert_array_equal(
        staticsem.load(model.save(tmp_path / "m", dtype="float32")).vectors, model.vectors
    )


# ---------------------------------------------------------------- plain vector files and gensim
VectorCase = tuple[str, str, Format, dict[str, Any]]  # export format, file name, detected format, gensim args
VECTOR_FILES = [
    pytest.param(("word2vec", "v.txt", Format.WORD2VEC, {"binary": False}), id="word2vec"),
    pytest.param(("word2vec", "v.txt.gz", Format.WORD2VEC, {"binary": False}), id="word2vec-gz"),
    pytest.param(("word2vec-binary", "v.bin", Format.WORD2VEC_BINARY, {"binary": True}), id="binary"),
    pytest.param(("word2vec-binary", "v.bin.gz", Format.WORD2VEC_BINARY, {"binary": True}), id="binary-gz"),
    pytest.param(("glove", "g.txt", Format.GLOVE, {"binary": False, "no_header": True}), id="glove"),
    pytest.param(("glove", "g.txt.gz", Format.GLOVE, {"binary": False, "no_header": True}), id="glove-gz"),
    pytest.param(("fasttext", "f.vec", Format.FASTTEXT, {"binary": False}), id="vec"),
    pytest.param(("fasttext", "f.vec.gz", Format.FASTTEXT, {"binary": False}), id="vec-gz"),
]


@pytest.mark.parametrize("case", VECTOR_FILES)
def test_our_vector_files_load_in_gensim(tiny_model: StaticModel, tmp_path: Path, case: VectorCase) -> None:
    fmt, name, detected, gensim_args = case
    path = export(tiny_model, tmp_path / name, fmt)
    assert detect(path) is detected
    kv = gensim.models.KeyedVectors.load_word2vec_format(str(path), **gensim_args)
    expected = as_dict(tiny_model.vocab, tiny_model.vectors)
    assert_same_vectors(as_dict(list(kv.index_to_key), kv.vectors), expected)
    back = staticsem.load(path)  # lossless: float32 values are written with enough digits
    assert_same_vectors(as_dict(back.vocab, back.vectors), expected, exact=True)


@pytest.mark.parametrize("case", VECTOR_FILES)
def test_gensim_vector_files_load_in_staticsem(
    tiny_model: StaticModel, tmp_path: Path, case: VectorCase
) -> None:
    _, name, detected, gensim_args = case
    kv = gensim.models.KeyedVectors(vector_size=tiny_model.dim)
    kv.add_vectors(tiny_model.vocab, tiny_model.vectors)
    header = not gensim_args.get("no_header", False)
    kv.save_word2vec_format(str(tmp_path / name), binary=gensim_args["binary"], write_header=header)
    assert detect(tmp_path / name) is detected
    loaded = staticsem.load(tmp_path / name)
    assert loaded.dtype == "float32"
    assert_same_vectors(as_dict(loaded.vocab, loaded.vectors), as_dict(tiny_model.vocab, tiny_model.vectors))


def test_tiny_binary_file_whose_floats_look_like_text(tmp_path: Path) -> None:
    """1 word × 1 dim: the vector bytes 'AAA\\xc0' are ASCII up to the last byte of a short file."""
    value = np.frombuffer(b"AAA\xc0", dtype="<f4")
    path = tmp_path / "one.bin"
    path.write_bytes(b"1 1\nw " + value.tobytes() + b"\n")
    assert detect(path) is Format.WORD2VEC_BINARY
    np.testing.assert_array_equal(staticsem.load(path).vectors, value[None, :])


@pytest.mark.parametrize("fmt", ["word2vec", "word2vec-binary", "glove", "fasttext"])
@pytest.mark.parametrize("word", [" lead", "new  york", "tab\tword", "line\nbreak"])
def test_words_with_whitespace_cannot_be_written(tmp_path: Path, fmt: str, word: str) -> None:
    model = StaticModel(["ok", word], np.ones((2, 3), np.float32))
    with pytest.raises(InputError, match="whitespace"):
        export(model, tmp_path / "v.txt", fmt)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- model2vec
def test_model2vec_loads_our_export(lower_model: StaticModel, tmp_path: Path) -> None:
    path = export(lower_model, tmp_path / "m2v", "model2vec")
    assert detect(path) is Format.MODEL2VEC
    theirs = np.asarray(model2vec.StaticModel.from_pretrained(str(path)).encode(LOWER_TEXTS), np.float32)
    assert (row_cosines(theirs, lower_model.encode(LOWER_TEXTS)) >= 0.99).all()


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8"])
def test_staticsem_loads_a_model2vec_folder(tmp_path: Path, dtype: str) -> None:
    words = ["[UNK]", "[PAD]", "the", "cat", "sat", "on", "mat", "Dog"]
    vectors = np.random.default_rng(3).normal(size=(len(words), 6)).astype(np.float32)
    stored = model2vec.quantization.quantize_embeddings(vectors, model2vec.quantization.DType(dtype))
    theirs = model2vec.StaticModel(vectors=stored, tokenizer=word_level(words), config={}, normalize=True)
    theirs.save_pretrained(str(tmp_path / "m2v"))
    assert detect(tmp_path / "m2v") is Format.MODEL2VEC
    loaded = staticsem.load(tmp_path / "m2v")
    assert loaded.vocab == words
    if dtype == "int8":
        assert (row_cosines(full(loaded), vectors) >= 0.99).all()
    else:
        np.testing.assert_array_equal(full(loaded), stored.astype(np.float32))
    texts = ["the cat sat on the mat", "Dog sat"]
    reference = np.asarray(theirs.encode(texts), np.float32)
    assert (row_cosines(loaded.encode(texts), reference) >= 0.99).all()


@pytest.mark.parametrize("fmt", ["model2vec", "sentence-transformers", "staticsem"])
def test_a_table_in_any_memory_order_exports_as_its_values(tmp_path: Path, fmt: str) -> None:
    words = ["[UNK]", "[PAD]", "the", "cat", "sat", "on", "mat", "Dog"]
    vectors = np.random.default_rng(5).normal(size=(len(words), 6)).astype(np.float32)
    model2vec.StaticModel(vectors=vectors, tokenizer=word_level(words), normalize=True).save_pretrained(
        str(tmp_path / "m2v")
    )
    token_level = staticsem.load(tmp_path / "m2v")
    fortran = StaticModel(
        token_level.vocab,
        np.asfortranarray(token_level.vectors),  # e.g. a transposed array handed to StaticModel
        tokenizer=token_level.tokenizer,
        tokens=token_level.tokens,
    )
    options = {"dtype": "float32"} if fmt == "staticsem" else {}
    back = staticsem.load(export(fortran, tmp_path / "out", fmt, **options))
    np.testing.assert_array_equal(full(back)[: len(words)], vectors)


def test_staticsem_loads_a_vocabulary_quantized_model2vec_folder(tmp_path: Path) -> None:
    words = ["[UNK]", "the", "cat", "sat", "on", "mat", "dog", "ran"]
    vectors = np.random.default_rng(4).normal(size=(len(words), 8)).astype(np.float32)
    theirs = model2vec.StaticModel(vectors=vectors, tokenizer=word_level(words), normalize=True)
    theirs = model2vec.model.quantize_model(theirs, vocabulary_quantization=3, quantize_to="float16")
    theirs.save_pretrained(str(tmp_path / "vq"))
    loaded = staticsem.load(tmp_path / "vq")
    assert loaded.vocab == words and loaded.dtype == "float32"
    texts = ["the cat sat", "dog ran on the mat", "cat"]
    reference = np.asarray(theirs.encode(texts), np.float32)
    assert (row_cosines(loaded.encode(texts), reference) >= 0.99).all()


# ---------------------------------------------------------------- sentence-transformers
def st_modules() -> Any:
    for name in ("sentence_transformers.sentence_transformer.modules", "sentence_transformers.models"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("sentence-transformers has no StaticEmbedding module")


def test_sentence_transformers_loads_our_export(lower_model: StaticModel, tmp_path: Path) -> None:
    path = export(lower_model, tmp_path / "st", "sentence-transformers")
    assert detect(path) is Format.SENTENCE_TRANSFORMERS
    theirs = sentence_transformers.SentenceTransformer(str(path), device="cpu").encode(
        LOWER_TEXTS, convert_to_numpy=True
    )
    ours = lower_model.encode(LOWER_TEXTS)
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, rtol=1e-5)
    assert (row_cosines(np.asarray(theirs, np.float32), ours) >= 0.99).all()


def test_staticsem_loads_a_sentence_transformers_folder(tmp_path: Path) -> None:
    modules = st_modules()
    words = ["[UNK]", "the", "cat", "sat", "on", "mat", "Dog"]
    vectors = np.random.default_rng(5).normal(size=(len(words), 10)).astype(np.float32)
    embedding = modules.StaticEmbedding(word_level(words), embedding_weights=vectors)
    teacher = sentence_transformers.SentenceTransformer(
        modules=[embedding, modules.Normalize()], device="cpu"
    )
    teacher.save(str(tmp_path / "st"))
    assert detect(tmp_path / "st") is Format.SENTENCE_TRANSFORMERS
    loaded = staticsem.load(tmp_path / "st")
    assert loaded.vocab == words
    np.testing.assert_array_equal(loaded.vectors, vectors)
    texts = ["the cat sat on the mat", "Dog sat"]
    reference = teacher.encode(texts, convert_to_numpy=True)
    assert (row_cosines(loaded.encode(texts), np.asarray(reference, np.float32)) >= 0.99).all()


@pytest.mark.parametrize("fmt", ["model2vec", "sentence-transformers"])
def test_rereading_our_hf_export_is_lossless(tiny_model: StaticModel, tmp_path: Path, fmt: str) -> None:
    back = staticsem.load(export(tiny_model, tmp_path / "out", fmt))
    assert back.vocab == tiny_model.vocab
    np.testing.assert_array_equal(back.vectors, tiny_model.vectors)
    assert back.tokenizer is not None and tiny_model.tokenizer is not None
    assert back.tokenizer.to_str() == tiny_model.tokenizer.to_str()
    assert back.metadata["method"] == tiny_model.metadata["method"]
    np.testing.assert_array_equal(back.encode(TEXTS), tiny_model.encode(TEXTS))


def test_rereading_a_quantized_model_export_keeps_its_values(tiny_model: StaticModel, tmp_path: Path) -> None:
    small = staticsem.load(tiny_model.save(tmp_path / "q", dtype="int8"))
    back = staticsem.load(export(small, tmp_path / "out", "model2vec"))
    np.testing.assert_allclose(back.vectors, full(small), rtol=1e-6)
