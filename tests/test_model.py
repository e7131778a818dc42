"""StaticModel: encoding, word operations, validation."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from staticsem import StaticModel
from staticsem.errors import InputError, ModelFormatError
from staticsem.quantize import DType, Scale, dequantize, quantize


def manual_encode(model: StaticModel, words: list[str]) -> np.ndarray:
    rows = [model.word_vector(w) for w in words]
    mean = np.mean(rows, axis=0)
    return mean / np.linalg.norm(mean)


def test_encode_is_normalised_mean_of_known_words(tiny_model: StaticModel) -> None:
    got = tiny_model.encode(["The cat, sat on the MAT!", "zzz the", ""])
    assert got.dtype == np.float32 and got.shape == (3, tiny_model.dim)
    np.testing.assert_allclose(
        got[0], manual_encode(tiny_model, ["the", "cat", "sat", "on", "the", "mat"]), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(got[1], manual_encode(tiny_model, ["the"]), rtol=1e-5, atol=1e-6)
    assert not got[2].any()


def test_unknown_only_text_gives_zero_row(tiny_model: StaticModel) -> None:
    assert not tiny_model.encode(["qqq !!! ...", "   "]).any()


def test_single_text_returns_vector(tiny_model: StaticModel) -> None:
    vector = tiny_model.encode("a happy dog")
    assert vector.shape == (tiny_model.dim,)
    np.testing.assert_allclose(np.linalg.norm(vector), 1.0, rtol=1e-6)


def test_subword_fallback_used_in_encoding(tiny_model: StaticModel) -> None:
    np.testing.assert_allclose(tiny_model.encode("unhappiness"), tiny_model.encode("un"), atol=1e-6)


def test_batches_and_workers_do_not_change_results(tiny_model: StaticModel) -> None:
    rng = np.random.default_rng(0)
    words = ["the", "cat", "dog", "house", "zzz", "Paris", "unhappiness"]
    texts = [" ".join(rng.choice(words, size=rng.integers(0, 8))) for _ in range(500)]
    reference = tiny_model.encode(texts, batch_size=10_000)
    np.testing.assert_array_equal(tiny_model.encode(texts, batch_size=7), reference)
    np.testing.assert_array_equal(tiny_model.encode(texts, batch_size=64, workers=2), reference)
    assert tiny_model.encode([]).shape == (0, tiny_model.dim)


def test_encode_rejects_non_strings(tiny_model: StaticModel) -> None:
    with pytest.raises(InputError, match="text 1 is a int"):
        tiny_model.encode(["ok", 3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("dtype", "scale"), [(DType.FLOAT16, Scale.ROW), (DType.INT8, Scale.ROW), (DType.INT8, Scale.MODEL)]
)
def test_quantised_storage_encodes_close(tiny_model: StaticModel, dtype: DType, scale: Scale) -> None:
    stored, scales = quantize(tiny_model.vectors, dtype, scale)
    if scales is not None and scales.size == 1:
        scales = np.full(len(tiny_model), scales[0], np.float32)
    small = StaticModel(tiny_model.vocab, stored, scales=scales, tokenizer=tiny_model.tokenizer)
    texts = ["the cat sat", "a happy dog ran", "queen and king"]
    cosines = np.sum(small.encode(texts) * tiny_model.encode(texts), axis=1)
    assert cosines.min() > 0.99
    assert (
        np.abs(dequantize(stored, scales) - tiny_model.vectors).max()
        < 0.05 * np.abs(tiny_model.vectors).max()
    )


def analogy_model() -> StaticModel:
    base = {
        "man": [1, 0, 0, 0],
        "woman": [1, 1, 0, 0],
        "king": [1, 0, 1, 0],
        "queen": [1, 1, 1, 0],
        "apple": [0, 0, 0, 1],
        "kings": [1, 0, 0.9, 0.1],
    }
    return StaticModel(list(base), np.array(list(base.values()), dtype=np.float32))


def test_analogy_3cosadd_excludes_inputs() -> None:
    answers = analogy_model().analogy("man", "king", "woman", k=2)
    assert answers[0][0] == "queen"
    assert {"man", "king", "woman"}.isdisjoint(word for word, _ in answers)


def test_most_similar_word_and_vector() -> None:
    model = analogy_model()
    neighbours = model.most_similar("king", k=3)
    assert neighbours[0][0] == "kings" and "king" not in [w for w, _ in neighbours]
    assert [s for _, s in neighbours] == sorted((s for _, s in neighbours), reverse=True)
    assert model.most_similar(np.array([0, 0, 0, 1.0]), k=1)[0][0] == "apple"
    assert len(model.most_similar("king", k=100)) == len(model) - 1
    with pytest.raises(InputError, match="not in the vocabulary"):
        model.most_similar("nonexistent")
    with pytest.raises(InputError, match="shape"):
        model.most_similar(np.zeros(3))


def test_similarity(tiny_model: StaticModel) -> None:
    assert tiny_model.similarity("the cat", "The CAT!") == pytest.approx(1.0, abs=1e-6)
    assert tiny_model.similarity("the cat", "zzz") == 0.0


def test_truncate_keeps_leading_dimensions(tiny_model: StaticModel) -> None:
    small = tiny_model.truncate(5)
    np.testing.assert_array_equal(small.vectors, tiny_model.vectors[:, :5])
    with pytest.raises(InputError):
        tiny_model.truncate(17)


@pytest.mark.parametrize(
    ("vocab", "matrix", "message"),
    [
        (["a", "b"], np.zeros((3, 4), np.float32), "vocabulary has 2 words but the matrix has 3 rows"),
        (["a", "a"], np.zeros((2, 4), np.float32), "'a' occurs more than once"),
        (["a", ""], np.zeros((2, 4), np.float32), "non-empty"),
        (["a", "b"], np.array([[0, np.nan], [1, 1]], np.float32), "NaN or infinite values .*row 0"),
        (["a", "b"], np.array([[0, 1], [np.inf, 1]], np.float16), "row 1, word 'b'"),
        (["a"], np.zeros(4, np.float32), "2-dimensional"),
        (["a"], np.zeros((1, 4), np.float64), "float32, float16 or int8"),
        (["a"], np.zeros((1, 4), np.int8), "int8 matrices need per-row scales"),
    ],
)
def test_constructor_validation(vocab: list[str], matrix: np.ndarray, message: str) -> None:
    with pytest.raises(ModelFormatError, match=message):
        StaticModel(vocab, matrix)


def test_encoding_never_imports_torch(saved_model: object) -> None:
    code = (
        "import sys, staticsem; m = staticsem.load(sys.argv[1]); m.encode(['the cat sat']); "
        "m.most_similar('cat'); assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code, str(saved_model)], check=True)


def test_encode_without_normalisation_is_the_plain_mean(tiny_model: StaticModel) -> None:
    got = tiny_model.encode(["the cat zzz", ""], normalize=False)
    np.testing.assert_allclose(
        got[0], (tiny_model.word_vector("the") + tiny_model.word_vector("cat")) / 2, rtol=1e-5
    )
    assert not got[1].any()
