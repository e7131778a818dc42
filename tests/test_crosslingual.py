"""Contrastive training and cross-lingual models: pairs, the vocabulary merge, languages, InfoNCE, CLI."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import TINY_SWE, FakeTeacher, corpus_tokenizer, german, write_parallel
from staticsem.cli import app
from staticsem.distillation.corpus.parallel import read_pairs
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences, untag
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.stages.crosslingual import language_sources, merge_vocabularies
from staticsem.distillation.stages.kd import KDSettings, info_nce
from staticsem.distillation.teachers.teacher import trim_offsets
from staticsem.errors import InputError

TRAINING = KDSettings(lr=1e-2, batch_size=32, eval_every=10, patience=5, max_steps=400, dev_size=100)


@pytest.fixture()
def parallel_dir(tmp_path: Path) -> Path:
    english, _, pairs = write_parallel(tmp_path)
    lines = pairs.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "train.tsv").write_text("".join(lines[:1000]), encoding="utf-8")
    (tmp_path / "test.tsv").write_text("".join(lines[1000:]), encoding="utf-8")
    return tmp_path


@pytest.fixture()
def bilingual(parallel_dir: Path) -> Tokenizer:
    """A teacher tokenizer that reads both languages of ``parallel_dir``."""
    return corpus_tokenizer(parallel_dir / "english.txt", parallel_dir / "german.txt")


def build(folder: Path, teacher: FakeTeacher, out: str, **changes: object) -> staticsem.StaticModel:
    base: dict[str, object] = {
        "corpus": (f"en={folder / 'english.txt'}", f"de={folder / 'german.txt'}"),
        "vocab_size": 100,
        **TINY_SWE,
        "kd": TRAINING,
    }
    settings = SWESettings(**{**base, **changes})  # type: ignore[arg-type]
    pipeline = Pipeline(
        settings,
        folder / out,
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        save_every=0.0,
        work_dir=folder / ".shared.work",  # the models of one test share their steps
    )
    pipeline.run(dtype="float32")
    return staticsem.load(folder / out)


def retrieval(model: staticsem.StaticModel, pairs: Path) -> float:
    """Top-1 accuracy of finding each English sentence's translation."""
    left, right = read_pairs([pairs])
    scores = model.encode(left) @ model.encode(right).T
    return float(np.mean([right[b] == right[i] for i, b in enumerate(scores.argmax(1))]))


# ---------------------------------------------------------------- pairs, merge, languages
def test_read_pairs_drops_duplicates_and_reads_gzip(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("a dog\tein Hund\n\na dog\tein Hund\nthe cat \t die Katze\n")
    assert read_pairs([path]) == (["a dog", "the cat"], ["ein Hund", "die Katze"])
    listed = tmp_path / "eval.txt"
    listed.write_text("Die Katze!\n")  # a listed sentence drops its pair, whichever side holds it
    assert read_pairs([path], [str(listed)]) == (["a dog"], ["ein Hund"])


def test_exclude_drops_listed_pairs_from_contrastive_training(
    parallel_dir: Path, bilingual: Tokenizer
) -> None:
    train = parallel_dir / "train.tsv"
    listed = parallel_dir / "listed.txt"  # the English sides of 100 training pairs, as an evaluation set
    listed.write_text("\n".join(line.split("\t")[0] for line in train.read_text().splitlines()[:100]) + "\n")
    options = {"objective": "contrastive", "parallel": (str(train),), "exclude": (str(listed),)}
    model = build(parallel_dir, FakeTeacher(bilingual), "excluded", **options)
    assert model.metadata["steps"]["kd"]["contrastive_train"] == 810  # 900 pairs left, 90 of them for dev


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a dog\tein Hund\nonly one side\n", "pairs.tsv:2: expected two tab-separated sentences, got 1"),
        (b"a\tb\tc\n", "pairs.tsv:1: expected two tab-separated sentences, got 3"),
        (b"a dog\t \n", "pairs.tsv:1: expected two"),
        (b"\xff\xfe\tx\n", "pairs.tsv:1: not valid UTF-8"),
        (b"\n\n", "no sentence pairs"),
    ],
)
def test_read_pairs_rejects_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "pairs.tsv").write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_pairs([tmp_path / "pairs.tsv"])
    with pytest.raises(InputError, match="missing"):
        read_pairs([tmp_path / "absent.tsv"])


def test_merge_averages_identical_strings() -> None:
    en = (["the", "dog", "tom"], np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]))
    de = (["der", "tom", "hund"], np.array([[5.0, 5.0], [4.0, 0.0], [0.0, 3.0]]))
    words, vectors, shared = merge_vocabularies({"en": en, "de": de})
    assert words == ["the", "dog", "tom", "der", "hund"]
    np.testing.assert_allclose(vectors, [[1, 0], [0, 1], [3, 1], [5, 5], [0, 3]])
    assert shared == {"en": 0, "de": 1}
    assert vectors.dtype == np.float32


def test_language_sources(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("x\n")
    b.write_text("y\n")

    def sources(corpus: tuple[str, ...], languages: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
        return language_sources(SWESettings(corpus=corpus, languages=languages))

    assert sources((f"en={a}", f"de={b}", f"de={a}")) == {"en": (str(a),), "de": (str(b), str(a))}
    assert sources((f"en={a}",)) == {}  # one language: a plain run
    assert sources((str(a),)) == {}
    assert sources((str(a),), ("en", "de")) == {"en": (str(a),), "de": (str(a),)}
    with pytest.raises(InputError, match="tag every corpus"):
        sources((f"en={a}", str(b)))
    with pytest.raises(InputError, match="two or more languages"):
        sources((str(a),), ("en",))
    with pytest.raises(InputError, match="tagged already"):
        sources((f"en={a}", f"de={b}"), ("en", "de"))
    odd = tmp_path / "de=file.txt"  # an existing file whose name looks tagged stays a plain path
    odd.write_text("z\n")
    assert untag(str(odd)) == (None, str(odd))
    assert untag("de=" + str(a)) == ("de", str(a))


def test_language_identification_splits_an_untagged_corpus(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.txt"
    english = ["The weather is very nice today and we are going to the park.", "I would like a cup of tea."]
    germans = [
        "Das Wetter ist heute sehr schön und wir gehen in den Park.",
        "Ich möchte gern eine Tasse Tee.",
    ]
    mixed.write_text("\n".join(s for pair in zip(english, germans, strict=True) for s in pair) + "\n")

    def of(language: str) -> list[str]:
        return list(iter_sentences([str(mixed)], CorpusOptions(language=language, languages=("en", "de"))))

    assert of("en") == english
    assert of("de") == germans
    with pytest.raises(InputError, match="language identification"):
        list(iter_sentences([str(mixed)], CorpusOptions(language="en", languages=("en", "xx-not-a-code"))))


def test_trim_offsets_skips_the_space_sentencepiece_tokens_carry() -> None:
    text = "Two young  men"
    offsets = torch.tensor([[[0, 0], [0, 3], [3, 9], [9, 14], [0, 0]]])  # "▁young" spans its space
    trimmed = trim_offsets([text], offsets)
    assert trimmed[0].tolist() == [[0, 0], [0, 3], [4, 9], [11, 14], [0, 0]]


# ---------------------------------------------------------------- the contrastive objective
def test_info_nce_prefers_aligned_pairs_and_is_symmetric() -> None:
    rng = torch.Generator().manual_seed(0)
    left = torch.randn(8, 5, generator=rng)
    aligned = info_nce(left, left + 0.01 * torch.randn(8, 5, generator=rng), 0.05)
    shuffled = info_nce(left, left[torch.randperm(8, generator=rng)], 0.05)
    assert aligned < 0.1 < shuffled
    right = torch.randn(8, 5, generator=rng)
    assert torch.isclose(info_nce(left, right, 0.05), info_nce(right, left, 0.05))
    scores = torch.nn.functional.normalize(left, dim=1) @ torch.nn.functional.normalize(right, dim=1).T / 0.05
    by_hand = (
        -(scores.diag() - scores.logsumexp(1)).mean() / 2 - (scores.diag() - scores.logsumexp(0)).mean() / 2
    )
    assert torch.isclose(info_nce(left, right, 0.05), by_hand)


def test_cross_lingual_model_merges_languages_and_contrastive_training_aligns_them(
    parallel_dir: Path, bilingual: Tokenizer
) -> None:
    teacher = FakeTeacher(bilingual)
    plain = build(parallel_dir, teacher, "pca", stages=("extract", "pca"))
    passes = teacher.sentences
    assert {"dog", "zdog", "the", "zthe", "tom"} <= set(plain.vocab)
    assert plain.vocab.count("tom") == 1
    languages = plain.metadata["steps"]["merge"]["languages"]
    assert languages["de"]["shared_with_earlier"] == 1  # "tom"
    assert (
        plain.metadata["teacher_passes"] == passes == sum(x["sentences_chosen"] for x in languages.values())
    )
    # the shared name is the mean of its stage-1 vectors in both languages
    work = parallel_dir / ".shared.work"
    en, de, merged = (staticsem.load(work / f / "stage1") for f in ("en", "de", "."))
    np.testing.assert_allclose(
        merged.word_vector("tom"), (en.word_vector("tom") + de.word_vector("tom")) / 2, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(merged.word_vector("zdog"), de.word_vector("zdog"))
    # the per-sentence rows (teacher embeddings and token means) follow the merged sentence order
    rows = {f: load_file(str(work / f / "stage1.safetensors")) for f in ("en", "de", ".")}
    assert set(rows["."]) == {"embeddings", "token_means"}
    for key in rows["."]:
        np.testing.assert_array_equal(rows["."][key], np.concatenate([rows["en"][key], rows["de"][key]]))

    aligned = build(
        parallel_dir,
        teacher,
        "aligned",
        objective="contrastive",
        parallel=(str(parallel_dir / "train.tsv"),),
        stages=("extract", "pca", "kd"),
    )
    pieces = aligned.metadata["steps"]["pieces"]["pieces"]  # each subword piece alone, once
    assert teacher.sentences == passes + pieces  # stage 1 of both languages reused: no new sentence pass
    before, after = retrieval(plain, parallel_dir / "test.tsv"), retrieval(aligned, parallel_dir / "test.tsv")
    assert before < 0.3 and after > 0.7, (before, after)
    assert aligned.most_similar("dog", 1)[0][0] == german("dog")
    stats = aligned.metadata["steps"]["kd"]
    assert stats["objective"] == "contrastive" and stats["contrastive_train"] == 900
    assert stats["dev_loss_best"] < stats["dev_loss_start"]


def test_both_objectives_train_together_and_resume_reuses_every_step(
    parallel_dir: Path, bilingual: Tokenizer
) -> None:
    teacher = FakeTeacher(bilingual)
    options = {"objective": "both", "parallel": (str(parallel_dir / "train.tsv"),)}
    model = build(parallel_dir, teacher, "both", **options)
    stats = model.metadata["steps"]["kd"]
    assert stats["kd_train"] > 0 and stats["contrastive_train"] == 900
    assert retrieval(model, parallel_dir / "test.tsv") > 0.5
    passes = teacher.sentences
    again = build(parallel_dir, teacher, "both", **options)
    assert teacher.sentences == passes
    np.testing.assert_array_equal(again.vectors, model.vectors)


def test_english_only_contrastive_on_pairs(parallel_dir: Path, subword_tokenizer: object) -> None:
    teacher = FakeTeacher(subword_tokenizer)  # type: ignore[arg-type]
    english_pairs = parallel_dir / "en-en.tsv"
    lines = (parallel_dir / "english.txt").read_text(encoding="utf-8").splitlines()
    english_pairs.write_text(
        "".join(f"{a}\t{b}\n" for a, b in zip(lines, lines[1:], strict=False)), encoding="utf-8"
    )
    model = build(
        parallel_dir,
        teacher,
        "english",
        corpus=(str(parallel_dir / "english.txt"),),
        objective="contrastive",
        parallel=(str(english_pairs),),
    )
    assert "zdog" not in model.vocab and model.metadata["steps"]["kd"]["contrastive_train"] > 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"objective": "contrastive"}, "needs --parallel"),
        ({"parallel": ("pairs.tsv",)}, "goes with --objective contrastive or both"),
        ({"objective": "triplet"}, "objective must be one of kd, contrastive, both"),
        ({"objective": "both", "parallel": ("absent.tsv",)}, "absent.tsv: parallel pairs file is missing"),
    ],
)
def test_bad_objective_settings(parallel_dir: Path, changes: dict[str, object], message: str) -> None:
    changes = {
        k: tuple(str(parallel_dir / p) for p in v) if k == "parallel" else v  # type: ignore[union-attr]
        for k, v in changes.items()
    }
    with pytest.raises(InputError, match=message):
        SWESettings(corpus=(str(parallel_dir / "english.txt"),), **changes).validate()  # type: ignore[arg-type]


def test_cli_rejects_contrastive_options_for_other_methods(parallel_dir: Path) -> None:
    runner = CliRunner()
    common = ["distill", "--corpus", str(parallel_dir / "english.txt"), "--out", str(parallel_dir / "m")]
    result = runner.invoke(app, [*common, "--method", "ase", "--parallel", str(parallel_dir / "train.tsv")])
    assert result.exit_code != 0 and "--parallel and --kd-corpus are for the swe method" in result.output
    result = runner.invoke(app, [*common, "--method", "ase", "--kd-corpus", str(parallel_dir / "german.txt")])
    assert result.exit_code != 0 and "--kd-corpus are for the swe method" in result.output
    result = runner.invoke(app, [*common, "--objective", "contrastive"])
    assert result.exit_code != 0 and "needs --parallel" in result.output
    assert not (parallel_dir / "m").exists()


def test_teacher_prompt_is_read_but_belongs_to_no_word(tiny_teacher: Path) -> None:
    from staticsem.distillation.teachers.teacher import Teacher

    texts = ["A man plays the guitar.", "Zwei Hunde spielen im Schnee."]
    plain, prompted = Teacher(str(tiny_teacher)), Teacher(str(tiny_teacher), prompt="query: ")
    out, with_prompt = plain.forward(texts), prompted.forward(texts)
    assert prompted.prompt == "query: " and plain.prompt == ""
    for b, text in enumerate(texts):
        own = with_prompt.own[b].numpy()
        spans = [text[s:e] for s, e in with_prompt.offsets[b][own].tolist()]
        assert spans == [text[s:e] for s, e in out.offsets[b][out.own[b]].tolist()]  # same word pieces
    expected = prompted.model.encode(texts, prompt="query: ", normalize_embeddings=True)
    np.testing.assert_allclose(with_prompt.sentence.numpy(), expected, atol=1e-5)
    assert not np.allclose(with_prompt.sentence.numpy(), out.sentence.numpy(), atol=1e-3)


def test_cli_builds_a_cross_lingual_model_from_a_teacher_folder(
    parallel_dir: Path, tiny_teacher: Path
) -> None:
    folder = str(tiny_teacher)  # any Sentence Transformer folder
    out = parallel_dir / "en-de"
    args = ["distill", "--teacher", folder, "--prompt", "query: ", "--out", str(out)]
    args += [
        "--corpus",
        f"en={parallel_dir / 'english.txt'}",
        "--corpus",
        f"de={parallel_dir / 'german.txt'}",
    ]
    args += ["--objective", "both", "--parallel", str(parallel_dir / "train.tsv"), "--vocab-size", "120"]
    args += ["--min-count", "2", "--sentences-per-word", "400", "--pca-sentences", "800", "--dim", "16"]
    args += ["--kd-max-steps", "400"]
    args += ["--no-check-tokenizer"]  # an English WordPiece reads the fake German ("zdog") letter by letter
    args += ["--fallback", "prefix"]  # the pieces are tested in test_multilingual, test_swe
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    model = staticsem.load(out)
    assert {"dog", "zdog", "tom"} <= set(model.vocab) and model.dim == 16
    meta = model.metadata
    assert meta["settings"]["prompt"] == "query: " and meta["steps"]["kd"]["objective"] == "both"
    assert set(meta["steps"]["merge"]["languages"]) == {"en", "de"}
    assert retrieval(model, parallel_dir / "test.tsv") > 0.5
