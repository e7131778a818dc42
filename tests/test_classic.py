"""Classic baselines: word2vec and fastText trained with gensim, converted to StaticModel."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import staticsem
from staticsem import StaticModel
from staticsem.distillation.methods.classic import train as classic
from staticsem.distillation.methods.classic.train import distill_classic
from staticsem.errors import InputError

WORDS = [
    *("the", "a", "cat", "cats", "dog", "dogs", "garden", "gardens", "house", "houses", "tree", "trees"),
    *("green", "red", "blue", "big", "small", "eats", "sleeps", "jumps", "runs", "running", "quickly"),
    *("slowly", "café", "straße"),
]
OOV = ["catz", "gardenz", "runnings", "cafés", "straßen", "日本", "x"]
FAST: dict[str, Any] = {"dim": 16, "min_count": 2, "epochs": 3, "workers": 1, "show_progress": False}


def write_corpus(path: Path, sentences: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    lines = [
        " ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)), p=weights / weights.sum())).capitalize()
        + "."
        for _ in range(sentences)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("classic") / "corpus.txt")


def train(corpus: list[str], **settings: Any) -> tuple[StaticModel, Any]:
    """``distill_classic`` and the gensim model it converted."""
    seen: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    real = classic._train
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(classic, "_train", spy)
        model = distill_classic(corpus, **{**FAST, **settings})
    return model, seen[0]


@pytest.fixture(scope="module")
def fasttext(corpus: Path) -> tuple[StaticModel, Any]:
    return train([str(corpus)], algorithm="fasttext", buckets=2000)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# ---------------------------------------------------------------- fastText
def test_fasttext_rows_and_ngram_table_are_gensims(fasttext: tuple[StaticModel, Any]) -> None:
    model, trained = fasttext
    assert model.vocab == list(trained.wv.index_to_key) and len(model) == len(WORDS)
    np.testing.assert_array_equal(model.vectors, trained.wv.vectors)
    assert model.ngrams is not None
    np.testing.assert_array_equal(model.ngrams.vectors, trained.wv.vectors_ngrams)
    assert (model.ngrams.minn, model.ngrams.maxn, model.ngrams.buckets) == (3, 6, 2000)


@pytest.mark.parametrize("word", OOV)
def test_fasttext_unknown_word_vector_is_gensims(fasttext: tuple[StaticModel, Any], word: str) -> None:
    model, trained = fasttext
    assert word not in trained.wv.key_to_index
    assert cosine(model.word_vector(word), trained.wv[word]) > 0.9999
    assert cosine(model.word_vector(word.capitalize()), trained.wv[word]) > 0.9999  # trained lower-cased


def test_fasttext_encodes_unknown_words_like_gensim(fasttext: tuple[StaticModel, Any]) -> None:
    model, trained = fasttext
    expected = trained.wv["the"] + trained.wv["catz"] + trained.wv["jumps"] + trained.wv["straßen"]
    assert cosine(model.encode("The Catz jumps, straßen!"), expected) > 0.9999
    assert model.most_similar("catz", k=3)[0][0] in WORDS


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_trained_fasttext_survives_save_and_load(
    fasttext: tuple[StaticModel, Any], tmp_path: Path, dtype: str
) -> None:
    model = fasttext[0]
    loaded = staticsem.load(model.save(tmp_path / "ft", dtype=dtype))
    assert loaded.ngrams is not None and loaded.metadata == model.metadata
    texts = ["the catz jumps", "gardenz of trees"]
    assert np.all(np.sum(loaded.encode(texts) * model.encode(texts), axis=1) > 0.999)


def test_metadata_records_method_settings_and_corpus(fasttext: tuple[StaticModel, Any], corpus: Path) -> None:
    meta = json.loads(json.dumps(fasttext[0].metadata))  # JSON-ready, as config.json needs
    assert meta["method"] == "fasttext" and meta["vocabulary"] == len(WORDS) and meta["sentences"] > 250
    assert meta["settings"]["minn"] == 3 and meta["settings"]["buckets"] == 2000
    assert meta["settings"]["seed"] == 0 and meta["settings"]["lowercase"] is True
    assert meta["corpus"][0]["source"] == str(corpus) and len(meta["corpus"][0]["sha256"]) == 64
    assert meta["seconds"] >= 0 and meta["trainer"].startswith("gensim")
    assert meta["environment"]["gensim"] == meta["trainer"].split()[1] and "numpy" in meta["environment"]


# ---------------------------------------------------------------- word2vec
@pytest.mark.parametrize("sg", [False, True])
def test_word2vec_cbow_and_skipgram(corpus: Path, sg: bool) -> None:
    model, trained = train([str(corpus)], algorithm="word2vec", sg=sg, vocab_size=10)
    assert trained.sg == int(sg) and model.metadata["settings"]["sg"] is sg
    assert model.metadata["method"] == "word2vec" and "minn" not in model.metadata["settings"]
    assert model.ngrams is None and model.vocab == list(trained.wv.index_to_key)
    np.testing.assert_array_equal(model.vectors, trained.wv.vectors)
    assert 1 <= len(model) <= 10  # gensim's max_final_vocab
    counts = [trained.wv.get_vecattr(w, "count") for w in model.vocab]
    assert counts == sorted(counts, reverse=True)
    assert not model.encode("catz").any()


def test_same_seed_and_one_worker_give_the_same_vectors(corpus: Path) -> None:
    settings = {**FAST, "algorithm": "fasttext", "buckets": 500, "epochs": 2}
    first, again = (distill_classic([str(corpus)], **settings) for _ in range(2))
    np.testing.assert_array_equal(first.vectors, again.vectors)
    assert first.ngrams is not None and again.ngrams is not None
    np.testing.assert_array_equal(first.ngrams.vectors, again.ngrams.vectors)
    other = distill_classic([str(corpus)], **{**settings, "seed": 1})
    assert not np.array_equal(first.vectors, other.vectors)


def test_vectors_do_not_depend_on_the_python_hash_seed(corpus: Path, tmp_path: Path) -> None:
    script = (
        "import sys, numpy as np\n"
        "from staticsem.distillation.methods.classic.train import distill_classic\n"
        "m = distill_classic([sys.argv[1]], algorithm='word2vec', dim=8, min_count=2, epochs=1, workers=1,"
        " show_progress=False)\n"
        "np.save(sys.argv[2], m.vectors)\n"
    )
    saved = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"v{hash_seed}.npy"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", script, str(corpus), str(out)], check=True, env=env)
        saved.append(np.load(out))
    np.testing.assert_array_equal(*saved)


def test_stdin_corpus_is_kept_in_memory_for_the_epochs(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(corpus.read_bytes())))
    from_stdin = distill_classic(["-"], algorithm="word2vec", **FAST)
    from_file = distill_classic([str(corpus)], algorithm="word2vec", **FAST)
    assert from_stdin.vocab == from_file.vocab
    np.testing.assert_array_equal(from_stdin.vectors, from_file.vectors)


def test_progress_callback_reports_each_epoch(corpus: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="staticsem.distillation.methods.classic.train"):
        distill_classic([str(corpus)], algorithm="word2vec", **{**FAST, "show_progress": True})
    epochs = [r.getMessage() for r in caplog.records if "epoch" in r.getMessage()]
    assert len(epochs) == FAST["epochs"] and all("loss" in line for line in epochs)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"algorithm": "glove"}, "unknown algorithm 'glove'"),
        ({"dim": 0}, "dim must be at least 1"),
        ({"negative": 0}, "negative must be at least 1"),
        ({"vocab_size": 0}, "vocab_size must be at least 1"),
        ({"algorithm": "fasttext", "minn": 5, "maxn": 4}, r"minn \(5\) must not exceed maxn \(4\)"),
        ({"algorithm": "fasttext", "buckets": 0}, "buckets must be at least 1"),
        ({"sample": 1.5}, "sample must be in"),
        ({"min_count": 10_000}, "no word occurs min_count=10000 times"),
    ],
)
def test_bad_settings_are_input_errors(corpus: Path, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        distill_classic([str(corpus)], **{**FAST, "algorithm": "word2vec", **settings})


@pytest.fixture()
def empty_sources(tmp_path: Path) -> Iterator[dict[str, list[str]]]:
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "short.txt").write_text("one two\nthree\n", encoding="utf-8")
    yield {
        "no usable sentence": [str(tmp_path / "empty.txt"), str(tmp_path / "short.txt")],
        "corpus file is missing": [str(tmp_path / "missing.txt")],
        "no corpus given": [],
    }


@pytest.mark.parametrize("case", ["no usable sentence", "corpus file is missing", "no corpus given"])
def test_unusable_corpora_are_input_errors(empty_sources: dict[str, list[str]], case: str) -> None:
    with pytest.raises(InputError, match=case):
        distill_classic(empty_sources[case], algorithm="fasttext", **FAST)


def test_a_word_list_is_refused_not_ignored(corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "words.txt").write_text("cat\ndog\n", encoding="utf-8")
    with pytest.raises(InputError, match="word2vec takes its vocabulary from the corpus"):
        staticsem.distill("word2vec", corpus=[str(corpus)], vocabulary=tmp_path / "words.txt")
