"""The SWE pipeline with a fake teacher: stages, checkpoints, resume (also after SIGKILL), determinism."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer

import staticsem
from fakes import FakeTeacher, random_sentences, tiny_swe, write_corpus
from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.methods.swe.settings import SHORT_DEFAULT_MAX, SHORT_PER_CHOSEN
from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE, fit_abtt
from staticsem.distillation.stages.extract import extract
from staticsem.distillation.stages.kd import Distillation, KDSettings, _Split, similarity_loss, train_table
from staticsem.errors import InputError


def settings(corpus: Path, **changes: object) -> SWESettings:
    # these tests count the teacher's passes; test_pieces.py covers the pieces
    return tiny_swe(corpus, **{"fallback": "prefix", **changes})


def run(
    tmp: Path, teacher: FakeTeacher, out: str = "model", keep_analysis: bool = False, **changes: object
) -> staticsem.StaticModel:
    pipeline = Pipeline(
        settings(tmp / "corpus.txt", **changes),
        tmp / out,
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        save_every=0.0,
        keep_analysis=keep_analysis,
    )
    pipeline.run(dtype="float32")
    return staticsem.load(tmp / out)


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    write_corpus(tmp_path / "corpus.txt")
    return tmp_path


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, subword_tokenizer: Tokenizer) -> Path:
    """One uninterrupted build with these settings (``clean``, its work folder beside it) on the corpus every
    ``corpus_dir`` holds: the model other runs must give, built once for the module."""
    folder = tmp_path_factory.mktemp("clean")
    write_corpus(folder / "corpus.txt")
    run(folder, FakeTeacher(subword_tokenizer), out="clean")
    return folder


def test_full_pipeline_writes_model_metadata_and_analysis(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    teacher = FakeTeacher(subword_tokenizer)
    model = run(corpus_dir, teacher)
    assert model.dim == 6 and "cat" in model and "the" in model
    meta = model.metadata
    assert meta["method"] == "swe" and meta["teacher"] is not None and meta["corpus"][0]["sha256"]
    assert meta["teacher_passes"] == teacher.sentences < 1200  # passes are shared between words
    assert meta["teacher_passes"] < meta["reference_passes"]
    assert meta["steps"]["kd"]["dev_loss_best"] < meta["steps"]["kd"]["dev_loss_start"]
    assert model.similarity("cat dog", "kitten puppy") > model.similarity("cat dog", "tax court")
    # the model folder holds what encoding needs; the analysis data stays in the work folder...
    files = {"config.json", "model.safetensors", "tokenizer.json", "vocab.json"}
    assert {p.name for p in (corpus_dir / "model").iterdir()} == files
    analysis = load_file(str(corpus_dir / ".model.work" / "analysis.safetensors"))
    assert analysis["stage1"].shape == (len(model), 16) and analysis["components"].shape == (1, 16)
    # the stored fit is the one the PCA step applied: it maps stage 1 onto stage 2 and gives the analysis
    work = corpus_dir / ".model.work"
    abtt = ABTT.load(work / ABTT_FILE)
    stage1, stage2 = staticsem.load(work / "stage1"), staticsem.load(work / "stage2")
    np.testing.assert_allclose(abtt.apply(stage1.vectors), stage2.vectors, atol=1e-5)
    np.testing.assert_array_equal(analysis["components"], abtt.removed)
    # ...unless asked for: a rerun reuses every step and adds it
    teacher = FakeTeacher(subword_tokenizer)
    again = run(corpus_dir, teacher, keep_analysis=True)
    assert teacher.batches == 0 and {p.name for p in (corpus_dir / "model").iterdir()} == {
        *files,
        "analysis.safetensors",
    }
    np.testing.assert_array_equal(again.vectors, model.vectors)
    kept = load_file(str(corpus_dir / "model" / "analysis.safetensors"))
    assert kept.keys() == analysis.keys() and all(np.array_equal(kept[k], analysis[k]) for k in kept)


def test_same_seed_same_model(corpus_dir: Path, clean: Path, subword_tokenizer: Tokenizer) -> None:
    first = staticsem.load(clean / "clean")  # built in another folder
    second = run(corpus_dir, FakeTeacher(subword_tokenizer), out="b")
    assert first.vocab == second.vocab
    np.testing.assert_array_equal(first.vectors, second.vectors)


def test_changed_later_settings_reuse_extraction(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    run(corpus_dir, FakeTeacher(subword_tokenizer))
    teacher = FakeTeacher(subword_tokenizer)
    model = run(corpus_dir, teacher, dim=4)
    assert teacher.batches == 0 and model.dim == 4


def test_weight_averaging_changes_only_the_kd_key_and_off_keeps_earlier_keys(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    corpus, teacher = corpus_dir / "corpus.txt", FakeTeacher(subword_tokenizer)
    base = settings(corpus, kd_short=0)  # a run without KD-only text, as the keys were made before
    plain = Pipeline(base, corpus_dir / "m", teacher=teacher, show_progress=False).keys  # type: ignore[arg-type]
    averaged = Pipeline(
        settings(corpus, kd=replace(base.kd, average=0.9)),
        corpus_dir / "m",
        teacher=teacher,  # type: ignore[arg-type]
    ).keys
    assert [step for step in plain if plain[step] != averaged[step]] == ["kd"]
    # the settings before averaging (and edit families, and the whole-batch loss and its pairs)
    later = ("average", "family_share", "whole", "whole_pairs")
    before = {k: v for k, v in asdict(base.kd.resolved(False)).items() if k not in later}
    assert plain["kd"] == fingerprint({"pca": plain["pca"], "kd": before})


def test_words_past_rare_after_aim_at_their_own_count(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    taper = {"sentences_per_word": 8, "rare_after": 10, "sentences_per_rare_word": 3}
    small = settings(corpus_dir / "corpus.txt", **taper)
    assert small.tapers() and small.word_targets(15) == [8] * 10 + [3] * 5
    flat = replace(small, rare_after=40)  # at the vocabulary size or past it: every word the same
    assert not flat.tapers() and flat.word_targets(15) == [8] * 15
    model = run(corpus_dir, FakeTeacher(subword_tokenizer), stages=("extract",), **taper)
    words = len(json.loads((corpus_dir / ".model.work" / "vocab.json").read_text())["words"])
    assert words > 10 and model.metadata["reference_passes"] == 8 * 10 + 3 * (words - 10)


def test_stage_prefix(corpus_dir: Path, subword_tokenizer: Tokenizer) -> None:
    model = run(corpus_dir, FakeTeacher(subword_tokenizer), stages=("extract", "pca"))
    assert model.dim == 6 and model.metadata["steps"].keys() == {"vocab", "select", "extract", "pca"}
    # the packages whose versions decide a build (the teacher's ONNX export and quantisation among them)
    saved = staticsem.load(corpus_dir / "model").metadata["environment"]
    for package in ("numpy", "torch", "tokenizers", "onnx", "onnxruntime"):
        assert saved[package] == metadata.version(package)
    with pytest.raises(InputError, match="prefix"):
        settings(corpus_dir / "corpus.txt", stages=("pca",)).validate()


def test_interrupted_extraction_resumes(corpus_dir: Path, clean: Path, subword_tokenizer: Tokenizer) -> None:
    reference = staticsem.load(clean / "clean")
    with pytest.raises(KeyboardInterrupt):
        run(corpus_dir, FakeTeacher(subword_tokenizer, fail_after=3))
    resumed_teacher = FakeTeacher(subword_tokenizer)
    resumed = run(corpus_dir, resumed_teacher)
    total = reference.metadata["teacher_passes"]
    assert 0 < resumed_teacher.sentences < total  # only the batches not saved before the interrupt
    np.testing.assert_allclose(resumed.vectors, reference.vectors, atol=1e-5)
    first, second = (
        load_file(str(d / "stage1.safetensors")) for d in (clean / ".clean.work", corpus_dir / ".model.work")
    )
    assert set(first) == set(second) == {"embeddings", "token_means"}
    for key in first:  # the per-sentence outputs saved before the interrupt come back in place
        np.testing.assert_allclose(second[key], first[key], atol=1e-6)


def test_a_pass_keeps_each_sentence_s_plain_token_mean() -> None:
    from staticsem.distillation.stages.extract import accumulate
    from staticsem.distillation.stages.passes import zero_sums
    from staticsem.distillation.teachers.teacher import TeacherBatch

    class Stub:
        hidden_size = 2

        def forward(self, texts: list[str], layer: int | None = None) -> TeacherBatch:
            states = torch.tensor(
                [[[9.0, 9.0], [1, 2], [3, 4], [9, 9], [0, 0]], [[9, 9], [5, 7], [9, 9], [0, 0], [0, 0]]]
            )
            own = torch.tensor([[False, True, True, False, False], [False, True, False, False, False]])
            offsets = torch.tensor(
                [[[0, 0], [0, 1], [2, 3], [0, 0], [0, 0]], [[0, 0], [0, 1], [0, 0], [0, 0], [0, 0]]]
            )
            return TeacherBatch(states, own, offsets, torch.eye(2))

    sums, counts = zero_sums(1, 2)
    found = accumulate(Stub(), ["a b", "a"], {"a": 0}, sums, counts, lowercase=True)  # type: ignore[arg-type]
    np.testing.assert_array_equal(found["token_means"], [[2, 3], [5, 7]])  # no [CLS]/[SEP]/padding
    assert found["token_means"].dtype == np.float16
    np.testing.assert_array_equal(found["embeddings"], np.eye(2))
    np.testing.assert_array_equal(sums.numpy(), [[6, 9]])  # 'a' in both texts; 'b' is not a vocabulary word
    assert counts.tolist() == [2]


SRC = Path(__file__).parents[1] / "src"  # the tree under test: a child must run it, not an installed copy
CHILD = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
import staticsem
assert Path(staticsem.__file__).resolve().is_relative_to(Path({src!r}).resolve()), staticsem.__file__
from conftest import PIECES
from fakes import FakeTeacher, tiny_swe, write_corpus
from test_swe import settings
from tokenizers import Tokenizer, models
from staticsem.distillation.methods.swe.pipeline import Pipeline
tok = Tokenizer(models.WordPiece({{p: i for i, p in enumerate(PIECES)}}, unk_token="[UNK]"))
teacher = FakeTeacher(tok, sleep_after=4)
Pipeline(settings(Path({corpus!r})), Path({out!r}), teacher=teacher, show_progress=False, save_every=0).run()
"""


def test_resume_after_sigkill(corpus_dir: Path, clean: Path, subword_tokenizer: Tokenizer) -> None:
    reference = staticsem.load(clean / "clean")
    tests = str(Path(__file__).parent)
    code = CHILD.format(
        tests=tests, src=str(SRC), corpus=str(corpus_dir / "corpus.txt"), out=str(corpus_dir / "model")
    )
    path = os.pathsep.join([str(SRC), tests, *filter(None, [os.environ.get("PYTHONPATH")])])
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path})
    work = corpus_dir / ".model.work"
    deadline = time.monotonic() + 60
    while not list(work.glob("stage1-*.partial.safetensors")) and time.monotonic() < deadline:
        assert child.poll() is None, "the child ended before it was killed"
        time.sleep(0.1)
    time.sleep(0.5)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert (work / "select.json").is_file() and not (work / "extract.json").exists()
    resumed_teacher = FakeTeacher(subword_tokenizer)
    resumed = run(corpus_dir, resumed_teacher)
    assert 0 < resumed_teacher.sentences < reference.metadata["teacher_passes"]
    np.testing.assert_allclose(resumed.vectors, reference.vectors, atol=1e-5)


def test_similarity_loss_prefers_the_teacher_structure() -> None:
    generator = torch.Generator().manual_seed(0)
    teacher = torch.randn(16, 8, generator=generator)
    same = similarity_loss(teacher.clone(), teacher, tau=0.05)
    other = similarity_loss(torch.randn(16, 8, generator=generator), teacher, tau=0.05)
    assert same < other


def test_dev_losses_pooled_at_once_equal_each_batch_s_own_loss(tiny_model: staticsem.StaticModel) -> None:
    rng = np.random.default_rng(1)
    words = list(tiny_model.vocab)
    sentences = [" ".join(rng.choice(words, size=rng.integers(1, 7))) for _ in range(50)]
    kd = Distillation(tiny_model, sentences, rng.normal(size=(50, 5)).astype(np.float32), 0.05)
    table = torch.from_numpy(rng.normal(size=tiny_model.vectors.shape).astype(np.float32))
    for rows in (np.arange(50), np.array([7, 3, 3, 41]), rng.permutation(50)[:9]):  # any order, repeats
        ids, offsets, _ = kd.bags.batch(rows)
        naive = [
            kd.bags.ids[s : s + c] for s, c in zip(kd.bags.starts[rows], kd.bags.counts[rows], strict=True)
        ]
        assert torch.equal(ids, torch.cat(naive))
        assert offsets.tolist() == [0, *np.cumsum(kd.bags.counts[rows])[:-1].tolist()]
    batches = [rng.permutation(50)[:n] for n in (16, 16, 5, 2)]
    each = [kd.loss(table, rows, False).item() for rows in batches]
    np.testing.assert_allclose(kd.batch_losses(table, batches), each, rtol=1e-6)
    assert len(set(each)) == len(each)  # four different batches, four different losses


def test_neighbour_groups_fill_their_share_of_each_batch_with_teacher_neighbours(
    tiny_model: staticsem.StaticModel,
) -> None:
    rng = np.random.default_rng(2)
    words = list(tiny_model.vocab)
    sentences = [" ".join(rng.choice(words, size=3)) for _ in range(4000)]
    centres = rng.normal(
        size=(400, 64)
    )  # 400 clusters of 10 sentences: a sentence's neighbours are its 9 mates
    targets = (np.repeat(centres, 10, axis=0) + 0.3 * rng.normal(size=(4000, 64))).astype(np.float32)
    kd = Distillation(tiny_model, sentences, targets, 0.05)
    unit = kd.directions()
    settings = KDSettings(batch_size=64, dev_size=400, group_share=0.5, group_size=8, group_pool=4000)
    split = _Split(kd, settings, np.random.default_rng(0))
    plain = _Split(kd, KDSettings(batch_size=64, dev_size=400), np.random.default_rng(0))
    train = set(split.train.tolist())

    def nearest_cosine(rows: np.ndarray) -> float:  # share of rows with a cluster mate in the batch
        cosines = unit[rows] @ unit[rows].T
        np.fill_diagonal(cosines, -2.0)
        return float((cosines.max(axis=1) > 0.5).mean())

    grouped, random = [], []
    for _ in range(60):
        rows = split.next_batch()
        assert 56 <= len(rows) <= 64 and len(set(rows.tolist())) == len(rows) and set(rows.tolist()) <= train
        grouped.append(nearest_cosine(rows))
        random.append(nearest_cosine(plain.next_batch()))
    # 4 groups of 8 (a seed and its 7 nearest): half the rows or more; a random batch has a few
    assert np.mean(grouped) >= 0.5 > 0.3 > np.mean(random)


def test_weight_averaging_keeps_the_moving_average_of_the_trained_tables(
    tiny_model: staticsem.StaticModel,
) -> None:
    rng = np.random.default_rng(3)
    words = list(tiny_model.vocab)
    sentences = random_sentences(words, 300, rng)
    targets = staticsem.StaticModel(words, rng.normal(size=(len(words), 8)).astype(np.float32)).encode(
        sentences
    )
    kd = Distillation(tiny_model, sentences, targets, 0.05)
    base = KDSettings(batch_size=32, eval_every=1, patience=100, dev_size=60, lr=0.01)
    # the plain run's table after 1, 2, 3 steps (its dev loss falls at each, so the last is kept)
    runs = [train_table(tiny_model, [kd], replace(base, max_steps=n), show_progress=False) for n in (1, 2, 3)]
    losses = [stats["dev_loss_best"] for _, stats in runs]
    assert losses[0] > losses[1] > losses[2]
    tables = [tiny_model.vectors, *(model.vectors for model, _ in runs)]
    expected = tables[0]
    for table in tables[1:]:
        expected = 0.5 * expected + 0.5 * table
    averaged, _ = train_table(tiny_model, [kd], replace(base, max_steps=3, average=0.5), show_progress=False)
    np.testing.assert_allclose(averaged.vectors, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(averaged.vectors, tables[-1], atol=1e-4)


def test_centred_targets_restore_the_structure_a_shared_direction_hides(
    tiny_model: staticsem.StaticModel,
) -> None:
    """Teachers like e5 put every sentence near one direction: τ-softmax targets become near uniform."""
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(64, 16)).astype(np.float32)
    targets = 8 * np.ones(16, np.float32) / 4 + 0.1 * signal  # cosine ≈ 0.99 between any two
    sentences = ["the cat"] * 64
    plain = Distillation(tiny_model, sentences, targets, 0.05, center=False).targets
    centred = Distillation(tiny_model, sentences, targets, 0.05, center=True).targets
    np.testing.assert_allclose(centred.mean(0).numpy(), 0, atol=1e-5)

    def entropy(t: torch.Tensor) -> float:
        t = torch.nn.functional.normalize(t, dim=1)
        logits = (t @ t.T / 0.05).masked_fill(torch.eye(len(t), dtype=torch.bool), float("-inf"))
        q = torch.softmax(logits, dim=1)
        return float(-(q * torch.log(q.clamp(min=1e-30))).sum(1).mean())

    assert entropy(plain) > 0.99 * np.log(63) > entropy(centred) + 0.3
    assert entropy(centred) == pytest.approx(entropy(torch.from_numpy(0.1 * signal - 0.1 * signal.mean(0))))


def test_abtt_removes_the_top_singular_vectors_of_the_centred_sentence_means(
    tiny_model: staticsem.StaticModel,
) -> None:
    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(tiny_model.vocab, size=5)) for _ in range(300)] + ["qqq zzz"]
    abtt = fit_abtt(tiny_model, sentences, remove_top=2, dim=5)
    means = np.stack(
        [tiny_model.vectors[[tiny_model.word_index(w) for w in s.split()]].mean(0) for s in sentences[:-1]]
    )
    centre = means.mean(axis=0)  # the sentence without a known word is left out
    _, singular, vt = np.linalg.svd(means - centre, full_matrices=False)
    assert singular[1] > 1.05 * singular[2] and singular[6] > 1.05 * singular[7]  # directions well defined
    np.testing.assert_allclose(abtt.mean, centre, atol=1e-5)
    np.testing.assert_allclose(np.abs(abtt.removed @ vt[:2].T), np.eye(2), atol=1e-4)  # same up to sign
    np.testing.assert_allclose(np.abs(abtt.kept @ vt[2:7].T), np.eye(5), atol=1e-4)
    projected = abtt.apply(np.asarray(tiny_model.vectors))
    expected = (tiny_model.vectors - centre) @ vt[2:7].T
    np.testing.assert_allclose(np.abs(projected), np.abs(expected), atol=1e-4)
    with pytest.raises(InputError, match="cannot remove"):
        fit_abtt(tiny_model, sentences, remove_top=10, dim=10)


def test_cli_swe_with_a_real_teacher(
    corpus_dir: Path, tiny_teacher: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole CLI build with a real ``Teacher`` (the tiny BERT: tokenizer, ONNX int8 export, pooling)."""
    from typer.testing import CliRunner

    from staticsem.cli import app

    write_corpus(corpus_dir / "corpus.txt", count=900, seed=1)
    args = [
        "distill",
        "--teacher",
        str(tiny_teacher),
        "--out",
        str(corpus_dir / "m"),
        "--corpus",
        str(corpus_dir / "corpus.txt"),
        "--vocab-size",
        "40",
        "--min-count",
        "2",
        "--sentences-per-word",
        "200",
        "--pca-sentences",
        "900",
        "--dim",
        "16",
        "--kd-max-steps",
        "80",
        "--dtype",
        "float32",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    model = staticsem.load(corpus_dir / "m")
    assert model.dim == 16 and model.metadata["teacher"] == str(tiny_teacher)
    assert model.metadata["settings"]["teacher_backend"] == "onnx-int8"  # auto, on the CPU
    assert model.metadata["settings"]["teacher_precision"] == "int8"
    assert model.metadata["runtime"]["device"] == "cpu, onnx-int8 int8"
    assert model.metadata["steps"]["kd"]["dev_loss_best"] < model.metadata["steps"]["kd"]["dev_loss_start"]
    assert model.similarity("cat", "kitten") > model.similarity("cat", "tax")
    assert model.similarity("guitar song", "music band") > model.similarity("guitar song", "court judge")
    # the build ends with its steps' table, which config.json keeps: time, teacher passes and their rate
    rows = {row["step"]: row for row in model.metadata["step_times"]}
    assert list(rows) == list(model.metadata["steps"]) and "reused" not in rows["kd"]
    assert rows["extract"]["teacher_passes"] == model.metadata["steps"]["extract"]["teacher_passes"] > 0
    assert rows["extract"]["sentences_per_second"] > 0 and rows["kd"]["counted"] == "steps"
    assert all(f"│ {step} " in result.stderr for step in rows) and "sentences/s" in result.stderr
    # a rerun finds every step finished and only saves the model again
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="staticsem"):
        again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and caplog.text.count("reusing") == 8  # vocab ... targets, edits, kd
    assert again.stderr.count("(reused)") == 8  # and its table says so
    assert model.pieces is not None  # the default learns subword pieces
    # stage 1 chose every sentence: no short one left to edit, so no families and no search rows
    assert model.metadata["steps"]["edits"]["edited"] == 0 and "search" not in rows and not model.row_sets


def test_moved_corpus_with_the_same_content_reuses_every_step(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    run(corpus_dir, FakeTeacher(subword_tokenizer))
    (corpus_dir / "corpus.txt").rename(corpus_dir / "moved.txt")
    teacher = FakeTeacher(subword_tokenizer)
    pipeline = Pipeline(
        settings(corpus_dir / "moved.txt"),
        corpus_dir / "model",
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
    )
    pipeline.run()
    assert teacher.batches == 0


def test_kd_corpus_adds_targets_in_order_reuses_extraction_and_resumes(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    extra = write_corpus(corpus_dir / "domain.txt", count=300, seed=7)
    plain_teacher = FakeTeacher(subword_tokenizer)
    only = {"kd_corpus": (str(extra),), "kd_short": 0}  # the KD-only file alone
    plain = run(corpus_dir, plain_teacher, out="plain", kd_short=0)
    # interrupted in the targets pass (after the extraction's batches), then resumed
    with pytest.raises(KeyboardInterrupt):
        run(corpus_dir, FakeTeacher(subword_tokenizer, fail_after=4), out="plain", **only)
    teacher = FakeTeacher(subword_tokenizer)
    model = run(corpus_dir, teacher, out="plain", **only)
    steps = model.metadata["steps"]
    added = steps["targets"]["teacher_passes"]
    chosen = set(json.loads((corpus_dir / ".plain.work" / "select.json").read_text())["sentences"])
    sentences = json.loads((corpus_dir / ".plain.work" / "targets.json").read_text())["sentences"]
    assert len(sentences) == added > 200 and not chosen & set(sentences)
    assert 0 < teacher.sentences < added  # the extraction reused; the targets pass went on where it stopped
    assert model.metadata["teacher_passes"] == plain.metadata["teacher_passes"] + added
    assert steps["kd"]["kd_train"] + steps["kd"]["kd_dev"] == plain_teacher.sentences + added
    # the stored targets are the teacher's embeddings of those sentences, row for row
    stored = load_file(str(corpus_dir / ".plain.work" / "targets.safetensors"))["embeddings"]
    expected = FakeTeacher(subword_tokenizer).forward(sentences[:50]).sentence.numpy()
    np.testing.assert_allclose(stored[:50], expected, atol=1e-5)
    assert not np.allclose(model.vectors, plain.vectors)
    # a rerun reuses every step
    again = FakeTeacher(subword_tokenizer)
    run(corpus_dir, again, out="plain", **only)
    assert again.batches == 0


def test_kd_corpus_words_join_the_table_from_the_targets_passes(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    extra = write_corpus(corpus_dir / "domain.txt", count=300, seed=7)
    new = ["The zebra plays a guitar song.", "A zebra and a judge sing.", "One zebra sings at court."]
    extra.write_text(extra.read_text() + "\n".join([*new, "A lone yak sings today."]) + "\n")
    plain = run(corpus_dir, FakeTeacher(subword_tokenizer), out="plain", kd_corpus=(str(extra),))
    words = {"kd_corpus": (str(extra),), "kd_corpus_words": 3}
    untrained = run(
        corpus_dir, FakeTeacher(subword_tokenizer), kd=replace(settings(extra).kd, max_steps=0), **words
    )
    model = run(corpus_dir, FakeTeacher(subword_tokenizer), **words)  # reuses all but the distillation
    assert "zebra" in model.vocab and "yak" not in model.vocab and "zebra" not in plain.vocab
    assert (
        model.vocab[: len(plain.vocab)] == plain.vocab
        and model.metadata["steps"]["targets"]["new_words"] == 1
    )
    # its vector before distillation: its teacher states in those sentences, through the PCA step's fit
    states = extract(FakeTeacher(subword_tokenizer), new, ["zebra"], lowercase=True, show_progress=False)
    start = ABTT.load(corpus_dir / ".model.work" / ABTT_FILE).apply(states.vectors())[0]
    np.testing.assert_allclose(untrained.word_vector("zebra"), start, rtol=1e-5, atol=1e-6)
    assert not np.allclose(model.word_vector("zebra"), start, atol=1e-3)  # and distillation moves it


def test_kd_short_draws_short_unchosen_corpus_sentences_as_targets(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    plain_teacher = FakeTeacher(subword_tokenizer)
    plain = run(corpus_dir, plain_teacher, out="plain", kd_short=0)
    teacher = FakeTeacher(subword_tokenizer)
    model = run(corpus_dir, teacher, out="plain", kd_short=100)
    work = corpus_dir / ".plain.work"
    chosen = set(json.loads((work / "select.json").read_text())["sentences"])
    sentences = json.loads((work / "targets.json").read_text())["sentences"]
    lines = (corpus_dir / "corpus.txt").read_text().splitlines()
    eligible = [t for t in dict.fromkeys(lines) if t not in chosen and 5 <= len(t.split()) <= 15]
    assert len(sentences) == len(set(sentences)) == 100 == teacher.sentences  # extraction reused
    assert set(sentences) <= set(eligible) and sentences != eligible[:100]  # drawn across the corpus
    assert model.metadata["teacher_passes"] == plain.metadata["teacher_passes"] + 100
    steps = model.metadata["steps"]
    assert steps["kd"]["kd_train"] + steps["kd"]["kd_dev"] == plain_teacher.sentences + 100
    assert not np.allclose(model.vectors, plain.vectors)
    again = FakeTeacher(subword_tokenizer)
    run(corpus_dir, again, out="plain", kd_short=100)
    assert again.batches == 0  # the same draw: every step reused
    other = FakeTeacher(subword_tokenizer)
    run(corpus_dir, other, out="plain", kd_short=100, seed=1)
    assert set(json.loads((work / "targets.json").read_text())["sentences"]) != set(sentences)
    corpus = corpus_dir / "corpus.txt"
    with pytest.raises(InputError, match="kd-short takes a count >= 0"):
        settings(corpus, kd_short=-1).validate()
    with pytest.raises(InputError, match="need --objective kd or both"):
        settings(corpus, kd_short=10, stages=("extract", "pca")).validate()


def test_kd_short_by_default_draws_a_share_of_stage_1s_count(
    corpus_dir: Path, subword_tokenizer: Tokenizer
) -> None:
    teacher = FakeTeacher(subword_tokenizer)
    model = run(corpus_dir, teacher, out="default")
    work = corpus_dir / ".default.work"
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    short = json.loads((work / "targets.json").read_text())["sentences"]
    lines = (corpus_dir / "corpus.txt").read_text().splitlines()
    eligible = {t for t in lines if t not in set(chosen) and 5 <= len(t.split()) <= 15}
    assert len(short) == round(SHORT_PER_CHOSEN * len(chosen)) < len(eligible)  # the corpus holds enough
    assert set(short) <= eligible and len(set(short)) == len(short)
    assert teacher.sentences == len(chosen) + len(short)
    steps = model.metadata["steps"]
    assert steps["kd"]["kd_train"] + steps["kd"]["kd_dev"] == len(chosen) + len(short)
    assert model.metadata["teacher_passes"] == len(chosen) + len(short)
    corpus = corpus_dir / "corpus.txt"
    # where the draw cannot run, the default is none (an explicit count is an error there, tested above)
    assert not replace(settings(corpus), corpus=("-",)).draws_short()
    assert not settings(corpus, stages=("extract", "pca")).draws_short()
    assert replace(settings(corpus), corpus=(f"en={corpus}", f"de={corpus}")).draws_short()  # each language
    assert settings(corpus).short_count(8) == 10 and settings(corpus, kd_short=0).short_count(8) == 0
    # the default stops at SHORT_DEFAULT_MAX (100k words choose 120-160k sentences); a count asked for is kept
    assert settings(corpus).short_count(100_000) == 125_000
    assert settings(corpus).short_count(137_538) == SHORT_DEFAULT_MAX == 160_000
    assert settings(corpus, kd_short=150_000).short_count(137_538) == 150_000


def test_kd_short_by_default_runs_without_short_sentences(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    lines = write_corpus(tmp_path / "long.txt").read_text().splitlines()
    (tmp_path / "corpus.txt").write_text("\n".join(" ".join(t.split()[:4]) for t in lines) + "\n")
    teacher = FakeTeacher(subword_tokenizer)
    model = run(tmp_path, teacher)  # no sentence of 5 words or more to draw: distillation as without
    assert json.loads((tmp_path / ".model.work" / "targets.json").read_text())["sentences"] == []
    steps = model.metadata["steps"]
    assert steps["kd"]["kd_train"] + steps["kd"]["kd_dev"] == teacher.sentences


def test_kd_corpus_is_checked(corpus_dir: Path) -> None:
    corpus = corpus_dir / "corpus.txt"
    with pytest.raises(InputError, match="missing"):
        settings(corpus, kd_corpus=(str(corpus_dir / "nope.txt"),)).validate()
    with pytest.raises(InputError, match="need --objective kd or both"):
        settings(corpus, kd_corpus=(str(corpus),), stages=("extract", "pca")).validate()
    with pytest.raises(InputError, match="text files"):
        settings(corpus, kd_corpus=("embedded",)).validate()
    with pytest.raises(InputError, match="kd-groups must be within 0..1"):
        settings(corpus, kd=KDSettings(group_share=1.5)).validate()
    with pytest.raises(InputError, match="kd-corpus-words takes a count >= 0 and needs --kd-corpus"):
        settings(corpus, kd_corpus_words=2).validate()
    with pytest.raises(InputError, match="kd-tau must be positive"):
        settings(corpus, kd=KDSettings(tau=0.0)).validate()
    with pytest.raises(InputError, match="kd-average must be within 0..1"):
        settings(corpus, kd=KDSettings(average=1.0)).validate()


# ---------------------------------------------------------------------- settings that follow the teacher
def test_a_wide_teacher_gets_its_own_layer_and_components_and_the_config_records_them(
    corpus_dir: Path, subword_tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 768-wide teacher is read at its second-to-last layer with 8 components removed; a narrow one at
    its last layer with width / 100; settings given explicitly win; config.json records what was used."""

    class Wide(FakeTeacher):
        hidden_size, num_layers = 768, 12

    layers: list[int | None] = []
    forward = FakeTeacher.forward

    def recording(self: FakeTeacher, texts: list[str], layer: int | None = None):  # type: ignore[no-untyped-def]
        layers.append(layer)
        return forward(self, texts, layer)

    monkeypatch.setattr(FakeTeacher, "forward", recording)
    wide = run(corpus_dir, Wide(subword_tokenizer), out="wide", remove_top=None, kd_short=0).metadata
    assert (wide["settings"]["layer"], wide["settings"]["remove_top"]) == (-2, 8)
    assert wide["steps"]["pca"]["remove_top"] == 8 and set(layers) == {-2}
    layers.clear()
    narrow = run(
        corpus_dir, FakeTeacher(subword_tokenizer), out="narrow", remove_top=None, kd_short=0
    ).metadata
    assert (narrow["settings"]["layer"], narrow["settings"]["remove_top"]) == (None, 1) and set(layers) == {
        None
    }
    layers.clear()
    given = run(corpus_dir, Wide(subword_tokenizer), out="given", layer=-1, remove_top=2, kd_short=0)
    given = given.metadata
    assert (given["settings"]["layer"], given["settings"]["remove_top"]) == (-1, 2) and set(layers) == {-1}


def test_the_teacher_s_shape_is_read_from_its_transformer_config(tmp_path: Path) -> None:
    """Width and depth come from the transformer's config (no weights), in a Sentence Transformer folder's
    own subfolder too; the packaged teacher is 384 wide, 6 layers deep."""
    from transformers import BertConfig

    from staticsem.distillation.teachers.teacher import teacher_shape

    folder = tmp_path / "st"
    BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12).save_pretrained(folder / "0_Tr")
    (folder / "modules.json").write_text(
        json.dumps(
            [{"idx": 0, "name": "0", "path": "0_Tr", "type": "sentence_transformers.models.Transformer"}]
        )
    )
    assert teacher_shape(str(folder)) == (768, 12)
    assert teacher_shape(None) == (384, 6)
    (folder / "0_Tr" / "config.json").unlink()
    with pytest.raises(InputError, match="cannot read the teacher's config"):
        teacher_shape(str(folder))
