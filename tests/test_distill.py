"""Token distillation: a fake teacher for the fast checks, the packaged MiniLM for real runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from staticsem.cli import app
from staticsem.distillation.corpus.vocabulary import read_word_list
from staticsem.distillation.methods.token.run import distill_token, zipf_weights
from staticsem.distillation.teachers.teacher import DEFAULT_TEACHER, Teacher, resolve_teacher
from staticsem.errors import InputError

WORDS = ["the", "cat", "dog", "tax", "law", "kitten", "puppy", "money", "court", "house", "tree", "bank"]


class FakeTeacher:
    """Deterministic 32-d word states from a hash; can fail after a number of batches."""

    id = "fake"
    hidden_size = 32
    backend = "torch"

    def __init__(self, tokenizer: Tokenizer, fail_after: int | None = None) -> None:
        self.subword_tokenizer = tokenizer
        self.fail_after = fail_after
        self.calls = 0

    def embed_alone(self, words: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt
        self.calls += 1
        seeds = [int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) for w in words]
        return np.stack([np.random.default_rng(s).normal(size=self.hidden_size) for s in seeds]).astype(
            np.float32
        )


def test_distill_token_shapes_and_weights(subword_tokenizer: Tokenizer) -> None:
    model = distill_token(FakeTeacher(subword_tokenizer), WORDS, dim=8, batch_size=5, show_progress=False)
    assert model.vocab == WORDS and model.vectors.shape == (len(WORDS), 8)
    assert model.metadata["method"] == "token" and model.metadata["settings"]["dim"] == 8
    weights = zipf_weights(len(WORDS), 1e-4)
    assert np.all(np.diff(weights) > 0)  # rarer words weigh more
    plain = distill_token(
        FakeTeacher(subword_tokenizer), WORDS, dim=8, batch_size=5, sif=None, show_progress=False
    )
    np.testing.assert_allclose(model.vectors, plain.vectors * weights[:, None], rtol=1e-5, atol=1e-7)
    ranks = 1 / np.arange(2, len(WORDS) + 2)
    np.testing.assert_allclose(weights, 1e-4 / (1e-4 + ranks / ranks.sum()), rtol=1e-6)


def test_distill_token_resumes_after_interrupt(subword_tokenizer: Tokenizer, tmp_path: Path) -> None:
    reference = distill_token(FakeTeacher(subword_tokenizer), WORDS, dim=8, batch_size=3, show_progress=False)
    with pytest.raises(KeyboardInterrupt):
        distill_token(
            FakeTeacher(subword_tokenizer, fail_after=2),
            WORDS,
            dim=8,
            batch_size=3,
            work_dir=tmp_path,
            show_progress=False,
        )
    resumed_teacher = FakeTeacher(subword_tokenizer)
    resumed = distill_token(
        resumed_teacher, WORDS, dim=8, batch_size=3, work_dir=tmp_path, show_progress=False
    )
    assert resumed_teacher.calls == 2  # 4 batches in all, 2 were saved before the interrupt
    np.testing.assert_allclose(resumed.vectors, reference.vectors, atol=1e-6)
    # a different vocabulary invalidates the saved chunks
    other = FakeTeacher(subword_tokenizer)
    distill_token(other, WORDS[::-1], dim=8, batch_size=3, work_dir=tmp_path, show_progress=False)
    assert other.calls == 4


def test_read_word_list(tmp_path: Path) -> None:
    path = tmp_path / "words.tsv"
    path.write_text("the\t100\ncat\t50\nthe\t3\ne-mail\t9\n\ndog\n", encoding="utf-8")
    assert read_word_list(path) == ["the", "cat", "dog"]
    assert read_word_list(path, limit=2) == ["the", "cat"]
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(InputError, match="words.tsv:2: not valid UTF-8"):
        read_word_list(path)
    path.write_text("...\n")
    with pytest.raises(InputError, match="no usable words"):
        read_word_list(path)


def test_resolve_teacher(tmp_path: Path) -> None:
    path, local = resolve_teacher(None)
    assert local and (Path(path) / "modules.json").is_file()
    assert resolve_teacher(DEFAULT_TEACHER) == (path, True)
    assert resolve_teacher("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2",
        False,
    )
    assert resolve_teacher(path) == (path, True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a Sentence Transformer folder"):
        resolve_teacher(str(tmp_path / "empty"))


@pytest.fixture(scope="module")
def teacher() -> Teacher:
    return Teacher()


@pytest.mark.slow
def test_real_teacher_token_model_has_meaning(teacher: Teacher) -> None:
    words = WORDS + ["car", "road", "music", "song", "king", "queen", "river", "water", "doctor", "nurse"]
    model = distill_token(teacher, words, dim=16, show_progress=False)
    assert model.similarity("cat", "kitten") > model.similarity("cat", "tax")
    assert model.similarity("money", "bank") > model.similarity("money", "tree")
    assert model.tokenizer is not None and model.encode("kittens").any()  # prefix fallback: "kitten"


@pytest.mark.slow
def test_real_teacher_vocabulary_tokens(teacher: Teacher) -> None:
    tokens = teacher.vocabulary_tokens()
    assert 15_000 < len(tokens) < 30_522 and "the" in tokens
    assert not any(t.startswith("##") or t.startswith("[") for t in tokens)


@pytest.mark.slow
def test_cli_distill_end_to_end(tmp_path: Path) -> None:
    vocab = tmp_path / "words.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    result = CliRunner().invoke(
        app,
        [
            "distill",
            "--method",
            "token",
            "--out",
            str(tmp_path / "m"),
            "--vocabulary",
            str(vocab),
            "--dim",
            "8",
            "--dtype",
            "float32",
        ],
    )
    assert result.exit_code == 0, result.stderr
    model = staticsem.load(tmp_path / "m")
    assert len(model) == len(WORDS) and model.dim == 8 and model.dtype == "float32"
    assert model.metadata["teacher"] == DEFAULT_TEACHER and model.metadata["method"] == "token"
    assert {"torch", "onnxruntime", "numpy"} <= set(model.metadata["environment"])  # what the rows rest on
    assert not (tmp_path / ".m.work").exists()  # work files removed once the model is saved
    card = (tmp_path / "m" / "README.md").read_text(encoding="utf-8")
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card and "| method | token |" in card
