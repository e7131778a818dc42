"""X2Static and ASE with a fake teacher: contexts, training, resume, determinism, option checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

import staticsem
from fakes import FakeTeacher, word_vector, write_corpus
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.methods.x2static.run import (
    LazyAdam,
    Sampler,
    Trainer,
    X2StaticRun,
    X2StaticSettings,
    negative_sampling_loss,
)
from staticsem.distillation.stages.contexts import chunk_arrays, group_contexts, groups
from staticsem.errors import InputError


def x2_settings(corpus: Path, **changes: object) -> X2StaticSettings:
    base = {
        "corpus": (str(corpus),),
        "vocab_size": 40,
        "min_count": 2,
        "epochs": 4,
        "lr": 0.05,
        "subsample": 1e-2,
        "batch_size": 32,
        "teacher_batch": 16,
        "chunk_sentences": 200,
    }
    return X2StaticSettings(**{**base, **changes})  # type: ignore[arg-type]


def run_x2(tmp: Path, teacher: FakeTeacher, out: str = "x2", **changes: object) -> staticsem.StaticModel:
    run = X2StaticRun(
        x2_settings(tmp / "corpus.txt", **changes),
        tmp / out,
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        save_every=0.0,
    )
    run.run(dtype="float32")
    return staticsem.load(tmp / out)


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    write_corpus(tmp_path / "corpus.txt", count=600)
    return tmp_path


def test_x2static_learns_topics_and_records_its_cost(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    teacher = FakeTeacher(subword_tokenizer)
    model = run_x2(corpus_dir, teacher)
    assert model.dim == FakeTeacher.hidden_size and "cat" in model and "the" in model
    meta = model.metadata
    assert meta["method"] == "x2static" and meta["teacher_passes"] == teacher.sentences == 600
    losses = meta["steps"]["train"]["epoch_losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert model.similarity("cat", "kitten") > model.similarity("cat", "court") + 0.2
    assert model.similarity("cat dog", "kitten puppy") > model.similarity("cat dog", "tax court")


def test_paragraph_contexts_are_each_sentences_own_tokens(subword_tokenizer: Tokenizer) -> None:
    teacher = FakeTeacher(subword_tokenizer)
    paragraphs = [["The cat sat.", "A dog barked loudly."], ["Rain fell."]]
    found = group_contexts(teacher, paragraphs)  # type: ignore[arg-type]
    assert found.shape == (3, FakeTeacher.hidden_size)
    joined = teacher.forward(["The cat sat. A dog barked loudly."])
    own = joined.own[0].clone()
    states = joined.states[0]
    cat_tokens = own & (joined.offsets[0, :, 0] < len("The cat sat."))
    np.testing.assert_allclose(found[0], states[cat_tokens].mean(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(found[1], states[own & ~cat_tokens].mean(0).numpy(), rtol=1e-5)
    alone = teacher.forward(["Rain fell."])
    np.testing.assert_allclose(found[2], alone.states[0][alone.own[0]].mean(0).numpy(), rtol=1e-5)


def test_every_sentence_of_a_paragraph_gets_its_own_tokens_third_and_later_too(
    subword_tokenizer: Tokenizer,
) -> None:
    """Paragraphs of one to five sentences of several lengths, read in batches (``chunk_arrays``): each
    sentence's context, the fifth of a paragraph as well as the first, is the mean of the teacher's states
    over the tokens that lie in that sentence within its paragraph's pass, on that sentence's row."""
    teacher = FakeTeacher(subword_tokenizer)
    chunk = [
        ["The cat sat.", "A dog barked loudly.", "Rain fell.", "Music and a song.", "Tax law!"],
        ["Rain fell on the river."],
        ["One.", "Two dogs ran.", "Three cats sat on the mat today."],
        ["The court judge.", "A fish.", "The band played a song in the rain.", "Done."],
    ]
    got = chunk_arrays(teacher, chunk, {"the": 0, "cat": 1}, True, batch_size=6)["contexts"]  # type: ignore[arg-type]
    want = []
    for group in chunk:
        joined = " ".join(group)
        out = teacher.forward([joined])
        starts = out.offsets[0, :, 0].numpy()
        at = 0
        for sentence in group:
            at = joined.index(sentence, at)
            mine = out.own[0].numpy() & (starts >= at) & (starts < at + len(sentence))
            want.append(out.states[0][mine].mean(0).numpy())
            at += len(sentence)
    assert got.shape == (13, FakeTeacher.hidden_size)
    np.testing.assert_allclose(got.astype(np.float32), np.stack(want), atol=2e-3)


def test_groups_pack_consecutive_sentences() -> None:
    sentences = ["one two three", "four five", "six seven eight nine", "ten"]
    assert list(groups(sentences, "sentence", 5)) == [[s] for s in sentences]
    assert list(groups(sentences, "paragraph", 5)) == [sentences[:2], sentences[2:]]
    assert list(groups(sentences, "paragraph", 2)) == [[s] for s in sentences]  # a long one stays whole


def test_paragraph_mode_runs(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    teacher = FakeTeacher(subword_tokenizer)
    model = run_x2(corpus_dir, teacher, context="paragraph", paragraph_words=40)
    assert teacher.sentences < 600 / 3  # several sentences per pass
    assert model.metadata["teacher_passes"] == teacher.sentences
    assert model.similarity("cat", "kitten") > model.similarity("cat", "court")


def test_same_seed_same_model_and_reuse(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    first = run_x2(corpus_dir, FakeTeacher(subword_tokenizer), out="a")
    second = run_x2(corpus_dir, FakeTeacher(subword_tokenizer), out="b")
    np.testing.assert_array_equal(first.vectors, second.vectors)
    teacher = FakeTeacher(subword_tokenizer)
    third = run_x2(corpus_dir, teacher, out="a", epochs=2)  # same contexts, new training
    assert teacher.batches == 0 and not np.array_equal(third.vectors, first.vectors)


def test_interrupted_contexts_and_training_resume(
    corpus_dir: Path, subword_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = run_x2(corpus_dir, FakeTeacher(subword_tokenizer), out="clean")
    with pytest.raises(KeyboardInterrupt):
        run_x2(corpus_dir, FakeTeacher(subword_tokenizer, fail_after=20), out="cut")
    original = Trainer.train_chunk
    calls = {"n": 0}

    def failing(self: Trainer, *args: object) -> None:
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Trainer, "train_chunk", failing)
    teacher = FakeTeacher(subword_tokenizer)
    with pytest.raises(KeyboardInterrupt):
        run_x2(corpus_dir, teacher, out="cut")
    assert 0 < teacher.sentences < 600  # the first chunks were not passed again
    monkeypatch.setattr(Trainer, "train_chunk", original)
    teacher = FakeTeacher(subword_tokenizer)
    resumed = run_x2(corpus_dir, teacher, out="cut")
    assert teacher.batches == 0
    np.testing.assert_array_equal(resumed.vectors, reference.vectors)


def test_sampler_and_loss() -> None:
    counts = np.array([10_000, 100, 1])
    sampler = Sampler(counts, int(counts.sum()), subsample=1e-3)
    assert sampler.keep[0] < 0.5 and sampler.keep[2] == 1.0
    rng = np.random.default_rng(0)
    draws = np.bincount(sampler.negatives((20_000, 1), rng).ravel(), minlength=3) / 20_000
    np.testing.assert_allclose(draws, np.sqrt(counts) / np.sqrt(counts).sum(), atol=0.01)
    table = torch.zeros(3, 4)
    table[0] = torch.tensor([1.0, 0, 0, 0])
    table[1] = torch.tensor([-1.0, 0, 0, 0])
    context = torch.tensor([[2.0, 0, 0, 0]])
    good = negative_sampling_loss(table[torch.tensor([[0, 1]])], context)
    bad = negative_sampling_loss(table[torch.tensor([[1, 0]])], context)
    assert good < bad
    huge = negative_sampling_loss(table[torch.tensor([[1, 0]])] * 1e4, context)
    assert torch.isfinite(huge) and huge.item() == pytest.approx(40.0, abs=1e-3)  # scores clamped at ±20


def test_lazy_adam_matches_torch_sparse_adam() -> None:
    generator = torch.Generator().manual_seed(0)
    start = torch.randn(30, 8, generator=generator)
    reference = torch.nn.Parameter(start.clone())
    sparse_adam = torch.optim.SparseAdam([reference], lr=0.05)
    lazy = LazyAdam(start.clone(), lr=0.05)
    for _ in range(6):
        index = torch.randint(0, 12, (20, 4), generator=generator)  # rows repeat; rows 12.. never move
        contexts = torch.randn(20, 8, generator=generator)
        sparse_adam.zero_grad()
        negative_sampling_loss(F.embedding(index, reference, sparse=True), contexts).backward()
        sparse_adam.step()
        rows = lazy.table[index].requires_grad_()
        (grad,) = torch.autograd.grad(negative_sampling_loss(rows, contexts), rows)
        lazy.step(index.reshape(-1), grad.reshape(-1, 8))
    assert not torch.equal(lazy.table, start)
    torch.testing.assert_close(lazy.table, reference.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lazy.exp_avg_sq, sparse_adam.state[reference]["exp_avg_sq"].to_dense())
    assert torch.equal(lazy.table[12:], start[12:])


def test_x2static_settings_are_checked(corpus_dir: Path) -> None:
    with pytest.raises(InputError, match="context"):
        x2_settings(corpus_dir / "corpus.txt", context="document").validate()
    with pytest.raises(InputError, match="negatives"):
        x2_settings(corpus_dir / "corpus.txt", negatives=0).validate()
    with pytest.raises(InputError, match="unknown x2static options: layer"):
        staticsem.distill("x2static", corpus=[str(corpus_dir / "corpus.txt")], out=corpus_dir / "m", layer=2)


def test_ase_takes_stage_one_from_the_chosen_layer(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    def ase(layer: int | None, out: str) -> staticsem.StaticModel:
        settings = SWESettings(
            corpus=(str(corpus_dir / "corpus.txt"),),
            vocab_size=40,
            min_count=2,
            sentences_per_word=20,
            stages=("extract",),
            layer=layer,
        )
        Pipeline(
            settings,
            corpus_dir / out,
            teacher=FakeTeacher(subword_tokenizer),
            show_progress=False,
            method="ase",
        ).run(dtype="float32")
        return staticsem.load(corpus_dir / out)

    first = ase(0, "layer0")
    assert first.metadata["method"] == "ase" and first.metadata["settings"]["layer"] == 0
    row = first.vectors[first.vocab.index("cat")]
    np.testing.assert_allclose(row, word_vector("cat", FakeTeacher.hidden_size), rtol=1e-5)  # no context
    last = ase(None, "last")
    assert not np.allclose(last.vectors[last.vocab.index("cat")], row)
    with pytest.raises(InputError, match="layer must be within"):
        ase(7, "bad")
    with pytest.raises(InputError, match="stage 1 alone"):
        staticsem.distill(
            "ase", corpus=[str(corpus_dir / "corpus.txt")], out=corpus_dir / "m", stages=("pca",)
        )


def test_cli_x2static_ase_and_word2vec_with_a_real_teacher(corpus_dir: Path, tiny_teacher: Path) -> None:
    from typer.testing import CliRunner

    from staticsem.cli import app
    from staticsem.distillation.teachers.teacher import Teacher

    corpus = str(corpus_dir / "corpus.txt")
    common = ["--corpus", corpus, "--vocab-size", "40", "--min-count", "2", "--dtype", "float32"]
    teacher = ["--teacher", str(tiny_teacher)]
    runs = {
        "x2s": [
            *("--method", "x2static", "--context", "paragraph", "--epochs", "3", "--lr", "0.005"),
            *("--prompt", "query: ", *teacher),
        ],
        "ase": ["--method", "ase", "--layer", "2", "--sentences-per-word", "5", *teacher],
        "w2v": ["--method", "word2vec", "--epochs", "2", "--dim", "16"],
    }
    for name, args in runs.items():
        result = CliRunner().invoke(app, ["distill", "--out", str(corpus_dir / name), *common, *args])
        assert result.exit_code == 0, result.stderr
    x2s, ase, w2v = (staticsem.load(corpus_dir / name) for name in runs)
    assert x2s.dim == ase.dim == 32 and w2v.dim == 16
    assert x2s.metadata["method"] == "x2static" and x2s.metadata["teacher_passes"] < 600 / 3
    assert x2s.metadata["settings"]["prompt"] == "query: " and x2s.metadata["settings"]["lr"] == 0.005
    assert ase.metadata["settings"]["layer"] == 2 and "cat" in ase and "cat" in w2v
    assert ase.similarity("cat", "kitten") > ase.similarity("cat", "tax")
    # a sentence's context is the mean of the real teacher's states over its own tokens
    real = Teacher(str(tiny_teacher))
    sentence = "The cat sat on the mat."
    context = group_contexts(real, [[sentence]])[0]
    tokens = real.model.encode(sentence, output_value="token_embeddings", convert_to_numpy=True)
    np.testing.assert_allclose(context, tokens[1:-1].mean(0), rtol=1e-4, atol=1e-5)  # without [CLS]/[SEP]
    # with a prompt the teacher reads it, but the context is still the mean over the sentence's tokens
    prompted = Teacher(str(tiny_teacher), prompt="query: ")
    context = group_contexts(prompted, [[sentence]])[0]
    tokens = prompted.model.encode(
        "query: " + sentence, output_value="token_embeddings", convert_to_numpy=True
    )
    np.testing.assert_allclose(context, tokens[3:-1].mean(0), rtol=1e-4, atol=1e-5)  # [CLS] query : ... [SEP]


def test_x2static_uses_the_chosen_splitter_and_prompt(
    corpus_dir: Path, subword_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from staticsem.text import SPLITTERS, WordSplitter

    class Characters(WordSplitter):
        name = "chars"

        def spans(self, text: str) -> list[tuple[int, int]]:
            return [(i, i + 1) for i, c in enumerate(text) if c.isalpha()]

        def words(self, text: str) -> list[str]:
            return [text[a:b] for a, b in self.spans(text)]

    monkeypatch.setitem(SPLITTERS, "chars", lambda tokenizer: Characters())  # removed afterwards
    settings = x2_settings(corpus_dir / "corpus.txt", splitter="chars", min_count=1, epochs=1)
    run = X2StaticRun(
        settings, corpus_dir / "chars", teacher=FakeTeacher(subword_tokenizer), show_progress=False
    )  # type: ignore[arg-type]
    model = run.run(dtype="float32")
    assert model.splitter.name == "chars" and staticsem.load(corpus_dir / "chars").splitter.name == "chars"
    assert all(len(word) == 1 for word in model.vocab) and "t" in model
    # every letter of every sentence is a target: the contexts step split sentences like the vocabulary
    store = run._store()
    targets = sum(int(store.load(i)["lengths"].sum()) for i in range(run.records["contexts"]["chunks"]))
    letters = sum(c.isalpha() for c in (corpus_dir / "corpus.txt").read_text())
    assert targets == letters
    # a prompt changes what the teacher reads: new contexts; the same prompt again reuses them
    prompted = x2_settings(corpus_dir / "corpus.txt", prompt="query: ")
    for expected_batches in (1, 0):
        teacher = FakeTeacher(subword_tokenizer)
        X2StaticRun(prompted, corpus_dir / "p", teacher=teacher, show_progress=False).run()  # type: ignore[arg-type]
        assert (teacher.batches > 0) == bool(expected_batches)
    assert staticsem.load(corpus_dir / "p").metadata["settings"]["prompt"] == "query: "
    with pytest.raises(InputError, match="unknown word splitter 'nope'"):
        x2_settings(corpus_dir / "corpus.txt", splitter="nope").validate()


def test_cli_refuses_prompt_and_splitter_for_gensim_methods(corpus_dir: Path) -> None:
    from typer.testing import CliRunner

    from staticsem.cli import app

    args = ["distill", "--method", "word2vec", "--corpus", str(corpus_dir / "corpus.txt")]
    for extra in (["--prompt", "query"], ["--splitter", "subword"]):
        result = CliRunner().invoke(app, [*args, *extra, "--out", str(corpus_dir / "w")])
        assert (
            result.exit_code != 0
            and "--prompt and --splitter are for the swe, ase and x2static" in result.output
        )
    result = CliRunner().invoke(app, [*args, "--lr", "0.01", "--out", str(corpus_dir / "w")])
    assert result.exit_code != 0 and "--lr is for the x2static and glove methods" in result.output
    assert not (corpus_dir / "w").exists()
