"""Learned subword pieces for unknown words: composition, files, training rows, the SWE default."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from conftest import PIECES, WORDS
from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.cli import app
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.methods.swe.rows import PIECES_FILE
from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE
from staticsem.distillation.stages.kd import Distillation, trainable_table, with_table
from staticsem.errors import ModelFormatError
from staticsem.model import StaticModel
from staticsem.pieces import PieceTable

UNKNOWN_WORDS = ["doggy", "houses", "unhappiness"]  # pieces: dog ##gy, house ##s, un ##happi ##ness


def piece_model(tokenizer: Tokenizer, weight: float = 1.0, seed: int = 3) -> StaticModel:
    rng = np.random.default_rng(seed)
    words = rng.normal(size=(len(WORDS), 8)).astype(np.float32)
    pieces = PieceTable(rng.normal(size=(len(PIECES), 8)).astype(np.float32), tokenizer, weight)
    return StaticModel(WORDS, words, tokenizer=tokenizer, pieces=pieces, metadata={"method": "test"})


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector, axis=-1, keepdims=True)


@pytest.mark.parametrize("weight", [1.0, 0.5, 0.0])
def test_an_unknown_word_is_its_pieces_mean_scaled_by_k_to_the_weight(
    subword_tokenizer: Tokenizer, weight: float
) -> None:
    model = piece_model(subword_tokenizer, weight)
    rows = model.pieces.vectors  # type: ignore[union-attr]
    index = {p: i for i, p in enumerate(PIECES)}
    pieces = [index[p] for p in ("un", "##happi", "##ness")]
    composed = rows[pieces].mean(axis=0) * 3**weight
    np.testing.assert_allclose(model.word_vector("Unhappiness"), composed, rtol=1e-5)
    # in a text it adds to the known words' sum with that weight
    known = model.vectors[[WORDS.index("the"), WORDS.index("cat")]].sum(axis=0)
    np.testing.assert_allclose(
        model.encode("the cat unhappiness"), unit(known + composed), rtol=1e-5, atol=1e-6
    )
    assert "unhappiness" not in model and model.most_similar("unhappiness", k=3)  # ranks vocabulary words
    with pytest.raises(staticsem.errors.InputError, match="a vector of its subword pieces only"):
        model.word_index("unhappiness")


def test_distillation_pools_what_encode_averages(subword_tokenizer: Tokenizer) -> None:
    # the training side must weigh each piece as the composed vector does, or train and use differ
    model = piece_model(subword_tokenizer, weight=0.5)
    sentences = ["the cat houses", "unhappiness of a dog", "doggy doggy king", "zz", "queen"]
    objective = Distillation(model, sentences, np.eye(len(sentences), 4, dtype=np.float32), 0.05)
    rng = np.random.default_rng(5)
    table = rng.normal(size=trainable_table(model).shape).astype(np.float32)
    pooled = objective.bags.pool(torch.from_numpy(table), np.arange(len(sentences)), False).numpy()
    moved = with_table(model, table, {})
    np.testing.assert_allclose(unit(pooled), moved.encode(sentences), rtol=1e-5, atol=1e-6)
    assert objective.bags.ids.max() >= len(model)  # piece rows are trained


def test_files_keep_the_pieces_in_every_dtype_and_exports_drop_them(
    tmp_path: Path, subword_tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    model = piece_model(subword_tokenizer, weight=0.5)
    texts = ["the doggy sat", "houses", "a king"]
    for dtype, tolerance in (("float32", 1e-6), ("float16", 2e-3), ("int8", 2e-2)):
        back = staticsem.load(model.save(tmp_path / dtype, dtype=dtype))
        assert back.pieces is not None and back.pieces.weight == 0.5
        np.testing.assert_allclose(back.encode(texts), model.encode(texts), atol=tolerance)
    config = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert config["subwords"] == {"type": "pieces", "pieces": len(PIECES), "weight": 0.5}
    assert load_file(str(tmp_path / "int8" / "model.safetensors"))["pieces"].dtype == np.float16
    small = model.truncate(4)
    np.testing.assert_allclose(small.word_vector("doggy"), model.word_vector("doggy")[:4], rtol=1e-6)
    with caplog.at_level(logging.WARNING):
        staticsem.io.export(model, tmp_path / "m.vec", "word2vec")
    assert "cannot hold subword piece vectors" in caplog.text
    result = CliRunner().invoke(app, ["info", str(tmp_path / "float32")])
    assert result.exit_code == 0 and "learned subword pieces" in result.output


def test_bad_piece_tables_are_refused(subword_tokenizer: Tokenizer) -> None:
    rows = np.zeros((len(PIECES), 8), np.float32)
    with pytest.raises(ModelFormatError, match="has 12 rows but the subword tokenizer has 13"):
        PieceTable(rows[:-1], subword_tokenizer)
    with pytest.raises(ModelFormatError, match="within 0..1"):
        PieceTable(rows, subword_tokenizer, 2.0)
    bad = rows.copy()
    bad[4, 1] = np.nan
    with pytest.raises(ModelFormatError, match="first in piece 4"):
        PieceTable(bad, subword_tokenizer)
    other = Tokenizer.from_str(subword_tokenizer.to_str())
    with pytest.raises(ModelFormatError, match="model's own subword tokenizer"):
        StaticModel(
            WORDS,
            np.zeros((len(WORDS), 8), np.float32),
            tokenizer=other,
            pieces=PieceTable(rows, subword_tokenizer),
        )
    with pytest.raises(ModelFormatError, match="8 dimensions but the matrix has 6"):
        StaticModel(
            WORDS,
            np.zeros((len(WORDS), 6), np.float32),
            tokenizer=subword_tokenizer,
            pieces=PieceTable(rows, subword_tokenizer),
        )


def swe(folder: Path, **changes: object) -> SWESettings:
    # min_count 8: the words of the unknown-word lines stay out of the vocabulary
    return tiny_swe(folder / "corpus.txt", **{"min_count": 8, "kd_short": 0, **changes})


def build(folder: Path, teacher: FakeTeacher, **changes: object) -> StaticModel:
    Pipeline(swe(folder, **changes), folder / "model", teacher=teacher, show_progress=False).run("float32")  # type: ignore[arg-type]
    return staticsem.load(folder / "model")


def test_swe_learns_the_pieces_of_unknown_words_by_default(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    lines = write_corpus(tmp_path / "corpus.txt").read_text().splitlines()
    extra = [
        f"The {w} was in the {v} again."
        for w, v in zip(UNKNOWN_WORDS * 2, ["lake", "court"] * 3, strict=True)
    ]
    (tmp_path / "corpus.txt").write_text("\n".join([*lines, *extra]) + "\n", encoding="utf-8")
    teacher = FakeTeacher(subword_tokenizer)
    model = build(tmp_path, teacher)
    assert model.pieces is not None and not set(UNKNOWN_WORDS) & set(model.vocab)
    steps = model.metadata["steps"]
    assert steps["pieces"]["pieces"] == len(PIECES) and model.metadata["teacher_passes"] == teacher.sentences
    # the start rows: each piece alone through the teacher, through the PCA step's fit
    work = tmp_path / ".model.work"
    start = ABTT.load(work / ABTT_FILE).apply(load_file(str(work / PIECES_FILE))["states"])
    moved = ~np.isclose(model.pieces.vectors, start, atol=1e-6).all(axis=1)
    used = {p for w in UNKNOWN_WORDS for p in subword_tokenizer.encode(w, add_special_tokens=False).tokens}
    assert {PIECES[i] for i in np.flatnonzero(moved)} == used  # distilled: the pieces of unknown words only
    np.testing.assert_allclose(
        unit(model.word_vector("houses")), unit(model.pieces.vectors[[7, 8]].mean(0)), rtol=1e-5
    )
    # another width reuses the pieces' teacher states; the prefix fallback builds without them
    again = FakeTeacher(subword_tokenizer)
    assert build(tmp_path, again, dim=4).pieces is not None and again.batches == 0
    plain = build(tmp_path, FakeTeacher(subword_tokenizer), fallback="prefix")
    assert plain.pieces is None and "pieces" not in plain.metadata["steps"]
    with pytest.raises(staticsem.errors.InputError, match="piece-weight must be within 0..1"):
        swe(tmp_path, piece_weight=1.5).validate()
    with pytest.raises(staticsem.errors.InputError, match="piece-train-weight must be within 0..1"):
        swe(tmp_path, piece_train_weight=-0.5).validate()
    with pytest.raises(staticsem.errors.InputError, match="fallback must be one of pieces, prefix"):
        swe(tmp_path, fallback="ngrams").validate()


def test_a_classifier_fine_tunes_the_words_and_keeps_the_pieces(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    from staticsem.train import StaticClassifier

    model = piece_model(subword_tokenizer, weight=0.5)
    rng = np.random.default_rng(4)
    topics = {"pets": ["cat", "dog", "doggy", "houses"], "royals": ["king", "queen", "unhappiness", "paris"]}
    texts, labels = [], []
    for i in range(120):
        label = ("pets", "royals")[i % 2]
        texts.append(" ".join(rng.choice(topics[label], 3)) + " the a")
        labels.append(label)
    options = {"epochs": 6, "batch_size": 16, "lr": 0.01, "table_lr": 0.01, "show_progress": False}
    classifier = StaticClassifier.fit(texts, labels, model, **options)
    tuned = classifier.model
    assert not np.allclose(tuned.vectors, model.vectors)  # the words' rows moved ...
    np.testing.assert_array_equal(tuned.pieces.vectors, model.pieces.vectors)  # ... the pieces did not
    again = StaticClassifier.load(classifier.save(tmp_path / "clf"))
    assert np.array_equal(again.predict_proba(texts), classifier.predict_proba(texts))


def test_the_classifier_s_network_reads_composed_rows_and_never_moves_them(
    subword_tokenizer: Tokenizer,
) -> None:
    from staticsem.train.network import Inputs, Net

    model = piece_model(subword_tokenizer)
    train = ["the doggy", "houses of a cat", "king unhappiness"]
    inputs = Inputs(model, train, [], model.encode(train), freeze=False)
    assert inputs.fixed is not None and inputs.fixed.sum() == 3  # doggy, houses, unhappiness
    net = Net(inputs.table, np.zeros(8), np.ones(8), 2, 0.0, 0, inputs.fixed)
    before = net.table.weight.detach().clone()  # type: ignore[union-attr]
    ids, offsets = inputs.batch("train", np.arange(3))
    np.testing.assert_allclose(unit(net.table(ids, offsets).detach().numpy()), model.encode(train), atol=1e-6)  # type: ignore[misc]
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    net(ids, offsets).sum().backward()
    optimizer.step()
    after = net.table.weight.detach()  # type: ignore[union-attr]
    fixed = torch.from_numpy(inputs.fixed)
    assert torch.equal(after[fixed], before[fixed]) and not torch.allclose(after[~fixed], before[~fixed])


def test_pieces_are_distilled_at_the_train_weight_and_the_model_encodes_at_its_own(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    model = build(tmp_path, FakeTeacher(subword_tokenizer), piece_weight=0.25, piece_train_weight=0.75)
    trained = staticsem.load(tmp_path / ".model.work" / "stage3")
    assert trained.pieces is not None and trained.pieces.weight == 0.75
    assert model.pieces is not None and model.pieces.weight == 0.25
    np.testing.assert_array_equal(model.pieces.vectors, trained.pieces.vectors)
    # the model's weight is no training setting: changing it rewrites the model, the distillation stays
    stamp = (tmp_path / ".model.work" / "stage3" / "model.safetensors").stat().st_mtime_ns
    again = build(tmp_path, FakeTeacher(subword_tokenizer), piece_weight=1.0, piece_train_weight=0.75)
    assert again.pieces is not None and again.pieces.weight == 1.0
    assert (tmp_path / ".model.work" / "stage3" / "model.safetensors").stat().st_mtime_ns == stamp
    assert {mode: s.piece_weight for mode, s in again.modes.items()} == {"query": 0.75, "document": 0.75}
    # --search-piece-weight sets the query and document modes' weight (0.75), encode keeps --piece-weight
    searched = build(
        tmp_path,
        FakeTeacher(subword_tokenizer),
        piece_weight=0.25,
        piece_train_weight=0.75,
        search_piece_weight=1.0,
    )
    assert searched.pieces is not None and searched.pieces.weight == 0.25
    assert {mode: s.piece_weight for mode, s in searched.modes.items()} == {"query": 1.0, "document": 1.0}
    assert (tmp_path / ".model.work" / "stage3" / "model.safetensors").stat().st_mtime_ns == stamp
