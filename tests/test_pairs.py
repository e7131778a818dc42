"""Training on pairs (``distillation.stages.pairs``, ``staticsem train-pairs``): reading, masking, the anchor,
the pieces, Matryoshka, mining, resuming, and the command."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from conftest import PIECES
from fakes import PAIR_DIM, pair_topic_model, topic_pairs
from staticsem import StaticModel, load
from staticsem.cli import app
from staticsem.distillation.corpus.exclude import sentence_hash
from staticsem.distillation.corpus.pairs import Pairs, read_pairs_files
from staticsem.distillation.stages.kd import Distillation, KDSettings
from staticsem.distillation.stages.mining import mine_negatives
from staticsem.distillation.stages.pairs import Anchor, Ranking, train_pairs
from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.distillation.stages.training import Objective, train_table
from staticsem.errors import InputError
from staticsem.modes import SEARCH_PIECE_WEIGHT
from staticsem.pieces import PieceTable

DIM = PAIR_DIM
FAST = PairsSettings(batch_size=32, max_steps=60, eval_every=10, patience=100, dev_size=40, lr=0.02)


@pytest.fixture()
def topic_model() -> StaticModel:
    """Random rows for 12 topics of 10 words: retrieval by topic is near chance before training."""
    return pair_topic_model()


def topic(text: str) -> str:
    return text.split("w")[0]


def recall_at_1(model: StaticModel, pairs: Pairs) -> float:
    """Share of queries whose best-scoring positive (among all pairs') is of the query's topic, each side
    encoded in its mode."""
    best = (model.encode_query(pairs.queries) @ model.encode_document(pairs.positives).T).argmax(axis=1)
    return float(
        np.mean([topic(pairs.positives[j]) == topic(q) for q, j in zip(pairs.queries, best, strict=True)])
    )


def write(path: Path, lines: list[str]) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


# ---------------------------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["a query\ta passage", "only one column"], "bad.tsv:2: one column"),
        (["a query\t   "], "bad.tsv:1: the positive is empty"),
        (["\ta passage"], "bad.tsv:1: the query is empty"),
        (["q\tp\tn", "q2\tp2"], "bad.tsv:2: a negative on some lines only"),
        (["q\tp", "q2\tp2\tn2"], "bad.tsv:2: a negative on some lines only"),
        (["q\tp\tn\tx"], "bad.tsv:1: 4 columns"),
    ],
)
def test_a_bad_pairs_line_is_one_error_naming_the_file_and_line(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    path = write(tmp_path / "bad.tsv", lines)
    with pytest.raises(InputError, match=message):
        read_pairs_files([path])


def test_pairs_are_read_from_gzip_minus_duplicates_and_listed_sentences(tmp_path: Path) -> None:
    listed = tmp_path / "eval.sha1"
    listed.write_text(sentence_hash("The secret sentence.") + "\n")
    path = write(
        tmp_path / "pairs.tsv.gz",
        [
            "who won\tThe team won. It was late.",
            "who won\tThe team won. It was late.",  # a duplicate
            "what was it\tA start. The secret sentence. An end.",  # a listed sentence inside the passage
            "the secret sentence\tanything",  # the query itself is listed
            "where\tIn Paris.",
        ],
    )
    pairs = read_pairs_files([path], exclude=[str(listed)])
    assert pairs.queries == ["who won", "where"]
    assert pairs.dropped == {"duplicate": 1, "excluded": 2}
    assert pairs.counts() == {"pairs.tsv.gz": 2}
    assert read_pairs_files([path], limit=1).queries == ["who won"]


# ---------------------------------------------------------------------------------------------- the loss
def manual_loss(
    queries: torch.Tensor, documents: torch.Tensor, target: list[int], mask: list[tuple[int, int]]
):
    scores = F.normalize(queries, dim=1) @ F.normalize(documents, dim=1).T / 0.05
    for row, column in mask:
        scores[row, column] = float("-inf")
    return F.cross_entropy(scores, torch.tensor(target))


def test_pairs_sharing_a_positive_share_its_column_and_never_rank_it_as_a_negative(
    topic_model: StaticModel,
) -> None:
    """Two questions of one paragraph: the paragraph is one column, the target of both."""
    pairs = Pairs(
        queries=["t0w1 t0w2", "t0w3 t0w4", "t1w1 t1w2", "t1w1 t1w2"],
        positives=[
            "t0w5 t0w6",
            "t0w5 t0w6",
            "t1w5 t1w6",
            "t1w7 t1w8",
        ],  # the last two: one query, two answers
        negatives=[None] * 4,
        sources=["x"] * 4,
    )
    ranking = Ranking(topic_model, pairs, None, 0.05)
    table = torch.from_numpy(topic_model.vectors)
    rows = np.arange(4)
    pooled_q = ranking.queries.pool(table, rows, False)
    docs = ranking.docs.pool(table, np.arange(3), False)  # three distinct documents
    # the last two pairs share a query text: each one's other answer is masked
    expected = manual_loss(pooled_q, docs, [0, 0, 1, 2], [(2, 2), (3, 1)])
    assert ranking.loss(table, rows, False).item() == pytest.approx(expected.item(), rel=1e-5)


def test_matryoshka_ranks_at_every_leading_width_given(topic_model: StaticModel) -> None:
    pairs = topic_pairs(8, seed=1)
    table = torch.from_numpy(topic_model.vectors)
    rows = np.arange(8)
    full = Ranking(topic_model, pairs, None, 0.05).loss(table, rows, False)
    narrow = Ranking(replace_dim(topic_model, 4), pairs, None, 0.05).loss(table[:, :4], rows, False)
    both = Ranking(topic_model, pairs, None, 0.05, dims=(4,)).loss(table, rows, False)
    assert both.item() == pytest.approx((full.item() + narrow.item()) / 2, rel=1e-5)


def test_training_with_matryoshka_ranks_better_at_the_leading_width(topic_model: StaticModel) -> None:
    """The claim of --pairs-matryoshka: truncated to the leading dimensions, the trained model ranks better
    than one trained at the full width alone."""
    train, held_out = topic_pairs(800, seed=2), topic_pairs(200, seed=3)
    settings = replace(FAST, into="all", max_steps=40)
    rows = np.arange(len(held_out))

    def narrow_loss(model: StaticModel) -> float:
        narrow = replace_dim(model, 2)
        table = torch.from_numpy(np.ascontiguousarray(narrow.vectors, dtype=np.float32))
        return Ranking(narrow, held_out, None, 0.05).loss(table, rows, False).item()

    plain, _ = train_pairs(topic_model, train, settings, show_progress=False)
    nested, record = train_pairs(topic_model, train, replace(settings, matryoshka=(2,)), show_progress=False)
    assert record["settings"]["matryoshka"] == (2,)
    assert narrow_loss(nested) < narrow_loss(plain) - 0.1, (narrow_loss(nested), narrow_loss(plain))


def replace_dim(model: StaticModel, dim: int) -> StaticModel:
    return StaticModel(model.vocab, np.ascontiguousarray(model.vectors[:, :dim]))


# ---------------------------------------------------------------------------------------------- training
def test_training_on_pairs_lifts_retrieval_of_held_out_pairs(topic_model: StaticModel) -> None:
    train, held_out = topic_pairs(800, seed=2), topic_pairs(120, seed=3)
    before = recall_at_1(topic_model, held_out)
    trained, record = train_pairs(
        topic_model, train, replace(FAST, hard_negatives=False), show_progress=False
    )
    after = recall_at_1(trained, held_out)
    assert before < 0.5 and after > 0.9, (before, after)
    assert record["pairs"] == {"topics.tsv": 800} and record["steps"] == 60
    assert trained.metadata["pairs"]["settings"]["batch_size"] == 32
    # the trained rows are the search modes' own: encode (similarity) is the model's as it was
    np.testing.assert_array_equal(trained.encode(held_out.queries), topic_model.encode(held_out.queries))
    assert {mode: settings.rows for mode, settings in trained.modes.items()} == {
        "query": "search",
        "document": "search",
    }
    shared, _ = train_pairs(
        topic_model, train, replace(FAST, hard_negatives=False, into="all"), show_progress=False
    )
    assert not shared.row_sets and not shared.modes
    np.testing.assert_allclose(shared.vectors, trained.row_sets["search"].vectors, atol=1e-6)
    # a model that already has search rows trains again from encode's rows (no "rows it lacks" error)
    again, _ = train_pairs(trained, train, replace(FAST, hard_negatives=False), show_progress=False)
    np.testing.assert_allclose(
        again.row_sets["search"].vectors, trained.row_sets["search"].vectors, atol=1e-6
    )
    np.testing.assert_array_equal(again.vectors, topic_model.vectors)


def test_pairs_with_no_known_word_on_either_side_are_skipped_and_counted(topic_model: StaticModel) -> None:
    pairs = topic_pairs(400, seed=2)
    for i in range(0, 60, 3):  # 20 queries of unknown words, 20 positives of unknown words
        pairs.queries[i] = "zzz qqq"
        pairs.positives[i + 1] = "xxx yyy"
    trained, record = train_pairs(topic_model, pairs, replace(FAST, max_steps=10), show_progress=False)
    assert record["skipped_unknown"] == 40
    assert record["pairs_train"] + record["pairs_dev"] == 360  # none of them trained or scored on


def anchor_loss(model: StaticModel, anchor: Anchor) -> float:
    distillation = Distillation(model, anchor.sentences, anchor.targets, 0.05)
    return distillation.loss(torch.from_numpy(model.vectors), np.arange(len(anchor.sentences)), False).item()


def test_the_anchor_keeps_the_teachers_similarities_while_pairs_train(topic_model: StaticModel) -> None:
    """The teacher here sees each word's own random direction: pairs alone pull a topic's words together
    and lose it; with the anchor's weight the student keeps more of it."""
    rng = np.random.default_rng(4)
    teacher_rows = rng.normal(size=(len(topic_model), DIM)).astype(np.float32)
    teacher = StaticModel(topic_model.vocab, teacher_rows)
    sentences = [" ".join(rng.choice(topic_model.vocab, 4)) for _ in range(600)]
    anchor = Anchor(sentences, teacher.encode(sentences))
    start = StaticModel(topic_model.vocab, teacher_rows.copy())
    pairs = topic_pairs(800, seed=5)
    settings = replace(FAST, hard_negatives=False, into="all")  # the anchor guards rows encode shares
    loose, _ = train_pairs(start, pairs, replace(settings, anchor_weight=0.0), anchor, show_progress=False)
    held, record = train_pairs(
        start, pairs, replace(settings, anchor_weight=2.0), anchor, show_progress=False
    )
    light, _ = train_pairs(start, pairs, replace(settings, anchor_weight=0.25), anchor, show_progress=False)
    assert record["anchor_sentences"] == 600
    losses = [anchor_loss(m, anchor) for m in (start, held, light, loose)]
    # the heavier the anchor, the more of the teacher's similarities the student keeps
    assert losses[1] < losses[2] - 0.1 and losses[2] < losses[3] - 0.1, losses


def pieces_model(topic_model: StaticModel, subword_tokenizer) -> StaticModel:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(6)
    rows = rng.normal(size=(len(PIECES), DIM)).astype(np.float32)
    base = StaticModel(topic_model.vocab, topic_model.vectors, tokenizer=subword_tokenizer)
    return base.with_pieces(PieceTable(rows, subword_tokenizer, 0.5))


def test_the_pieces_of_unknown_words_train_with_the_words_unless_fixed(
    topic_model: StaticModel, subword_tokenizer
) -> None:  # type: ignore[no-untyped-def]
    model = pieces_model(topic_model, subword_tokenizer)
    pairs = topic_pairs(400, seed=7)
    pairs.queries = [q + " unhappiness" if i % 2 else q for i, q in enumerate(pairs.queries)]
    settings = replace(FAST, hard_negatives=False, max_steps=20)
    trained, _ = train_pairs(model, pairs, settings, show_progress=False)
    search = trained.row_sets["search"]
    assert model.pieces is not None and search.pieces is not None
    moved = np.abs(search.pieces - model.pieces.vectors).max(axis=1)
    used = [PIECES.index(p) for p in ("un", "##happi", "##ness")]
    assert (moved[used] > 1e-3).all() and moved[PIECES.index("##gy")] == 0.0
    # a model without modes gets the search modes' default weight for the pieces; one with modes keeps theirs
    assert {m.piece_weight for m in trained.modes.values()} == {SEARCH_PIECE_WEIGHT} != {0.5}
    own = model.with_modes(query={"piece_weight": 1.0})
    moded, _ = train_pairs(own, pairs, settings, show_progress=False)
    assert moded.modes["query"].piece_weight == 1.0 and moded.modes["document"].piece_weight == 0.75
    fixed, _ = train_pairs(model, pairs, replace(settings, train_pieces=False), show_progress=False)
    kept = fixed.row_sets["search"]
    assert kept.pieces is not None
    np.testing.assert_array_equal(kept.pieces, model.pieces.vectors)
    assert not np.allclose(kept.vectors, model.vectors)


def test_mined_negatives_are_the_best_bm25_hits_that_are_not_the_querys_positives() -> None:
    documents = ["paris is in france", "the capital of france is paris", "dogs bark loudly", "cats sleep"]
    queries = ["capital of france", "capital of france", "do dogs bark"]
    positives = [1, 0, 2]  # the first query text has two positives: neither may be its negative
    mined = mine_negatives(queries, positives, documents, depth=1, show_progress=False)
    assert mined[0] not in (0, 1) and mined[1] not in (0, 1)
    assert mined[2] != 2
    again = mine_negatives(queries, [1, 1, 2], documents, depth=1, show_progress=False)
    assert again[0] == 0  # the best hit that is not its positive


class Interrupting(Objective):
    """Wraps an objective and raises after ``after`` training losses (a kill mid-run)."""

    def __init__(self, inner: Objective, after: int) -> None:
        self.inner, self.after, self.calls = inner, after, 0
        self.name, self.size = inner.name, inner.size

    def usable(self) -> np.ndarray:
        return self.inner.usable()

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        self.calls += 1
        if self.calls > self.after:
            raise KeyboardInterrupt
        return self.inner.loss(table, rows, sparse)

    def batch_losses(self, table: torch.Tensor, batches) -> list[float]:  # type: ignore[no-untyped-def]
        return self.inner.batch_losses(table, batches)


def test_an_interrupted_training_resumes_to_the_same_table(topic_model: StaticModel, tmp_path: Path) -> None:
    ranking = Ranking(topic_model, topic_pairs(400, seed=8), None, 0.05)
    settings = KDSettings(batch_size=32, eval_every=5, patience=100, max_steps=40, dev_size=40, lr=0.02)
    whole, _ = train_table(topic_model, [ranking], settings, False)
    checkpoint = tmp_path / "state.safetensors"
    with pytest.raises(KeyboardInterrupt):
        train_table(
            topic_model, [Interrupting(ranking, 23)], settings, False, checkpoint=checkpoint, save_every=0
        )
    assert checkpoint.is_file()
    other, _ = train_table(
        topic_model, [ranking], settings, False, checkpoint=checkpoint, key="other settings", save_every=0
    )
    assert not checkpoint.exists()  # a finished run removes its checkpoint
    with pytest.raises(KeyboardInterrupt):
        train_table(
            topic_model, [Interrupting(ranking, 23)], settings, False, checkpoint=checkpoint, save_every=0
        )
    resumed, stats = train_table(topic_model, [ranking], settings, False, checkpoint=checkpoint, save_every=0)
    assert stats["steps"] == 40
    np.testing.assert_allclose(resumed.vectors, whole.vectors, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(other.vectors, whole.vectors, rtol=1e-6, atol=1e-7)  # a fresh start, same seed


# ---------------------------------------------------------------------------------------------- command
def test_train_pairs_writes_a_model_and_bad_input_writes_nothing(
    topic_model: StaticModel, tmp_path: Path
) -> None:
    topic_model.save(tmp_path / "base")
    pairs = topic_pairs(400, seed=9)
    path = write(
        tmp_path / "pairs.tsv", [f"{q}\t{p}" for q, p in zip(pairs.queries, pairs.positives, strict=True)]
    )
    bad = write(tmp_path / "bad.tsv", ["a query\ta passage", "one column"])
    out = tmp_path / "search"
    options = [
        "--pairs-batch-size",
        "32",
        "--pairs-max-steps",
        "20",
        "--pairs-dev-size",
        "40",
        "--no-progress",
    ]
    result = CliRunner().invoke(
        app, ["train-pairs", str(tmp_path / "base"), "--pairs", str(bad), "--out", str(out), *options]
    )
    assert result.exit_code != 0 and "bad.tsv:2: one column" in str(result.output) + str(result.exception)
    assert not out.exists()
    result = CliRunner().invoke(
        app, ["train-pairs", str(tmp_path / "base"), "--pairs", str(path), "--out", str(out), *options]
    )
    assert result.exit_code == 0, result.output
    trained = load(out)
    assert trained.metadata["pairs"]["steps"] == 20 and trained.metadata["pairs"]["pairs"] == {
        "pairs.tsv": 400
    }
    np.testing.assert_array_equal(trained.vectors, topic_model.vectors.astype(np.float16))
    assert not np.allclose(trained.row_sets["search"].vectors, topic_model.vectors, atol=1e-3)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| trained on pairs | pairs.tsv (400); 20 steps; the rows of encode_query and" in card
    assert not (tmp_path / ".search.work").exists()


# ------------------------------------------------------------------------------------------- distill --pairs
def test_distill_with_pairs_trains_the_distilled_model_last_anchored_by_its_own_targets(
    tmp_path: Path, subword_tokenizer: object
) -> None:
    from fakes import TINY_SWE, TOPICS, FakeTeacher, write_corpus
    from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings

    corpus = write_corpus(tmp_path / "corpus.txt", count=1500)
    rng = np.random.default_rng(10)
    sentences = corpus.read_text(encoding="utf-8").splitlines()
    lines = []
    for sentence in sentences[:600]:
        topic = next(t for t in TOPICS if any(w in sentence.lower().split() for w in t))
        lines.append(f"{' '.join(rng.choice(topic, 2))}\t{sentence}")
    pairs = write(tmp_path / "pairs.tsv", lines)
    teacher = FakeTeacher(subword_tokenizer)  # type: ignore[arg-type]
    training = KDSettings(lr=1e-2, batch_size=32, eval_every=10, patience=5, max_steps=100, dev_size=100)
    quick = PairsSettings(
        batch_size=32, max_steps=30, eval_every=10, dev_size=40, hard_negatives=True, anchor_weight=1.0
    )

    def build(out: str, **changes: object) -> StaticModel:
        base: dict[str, object] = {
            "corpus": (str(corpus),),
            "vocab_size": 40,
            **TINY_SWE,
            "kd": training,
            "fallback": "prefix",
        }
        settings = SWESettings(**{**base, **changes})  # type: ignore[arg-type]
        run = Pipeline(
            settings,
            tmp_path / out,
            teacher=teacher,
            show_progress=False,
            save_every=0.0,  # type: ignore[arg-type]
            work_dir=tmp_path / ".shared.work",
        )
        run.run(dtype="float32")
        return load(tmp_path / out)

    plain = build("plain")
    passes = teacher.sentences
    searched = build("search", pairs=(str(pairs),), pairs_training=quick)
    assert teacher.sentences == passes  # the distillation's steps are reused, the anchor needs no pass
    record = searched.metadata["steps"]["pairs"]
    assert record["pairs"] == {"pairs.tsv": 600} and record["steps"] == 30
    edits = plain.metadata["steps"].get("edits", {}).get("teacher_passes", 0)
    assert record["anchor_sentences"] == plain.metadata["teacher_passes"] - edits  # chosen and short ones
    np.testing.assert_array_equal(searched.vectors, plain.vectors)  # encode's rows: the distilled ones
    assert not np.allclose(searched.row_sets["search"].vectors, plain.vectors, atol=1e-4)
    assert (tmp_path / ".shared.work" / "stage4").is_dir()
    # --exclude reaches the pairs too: a listed query drops every pair that asks it
    query = lines[0].split("\t")[0]
    listed = tmp_path / "eval.sha1"
    listed.write_text(sentence_hash(query) + "\n")
    hit = sum(line.split("\t")[0] == query for line in dict.fromkeys(lines))
    excluded = build("excluded", pairs=(str(pairs),), pairs_training=quick, exclude=(str(listed),))
    record = excluded.metadata["steps"]["pairs"]
    assert record["dropped"].get("excluded") == hit >= 1
    assert record["pairs"] == {"pairs.tsv": len(dict.fromkeys(lines)) - hit}
    with pytest.raises(InputError, match="--pairs trains the distilled model"):
        SWESettings(corpus=(str(corpus),), pairs=(str(pairs),), stages=("extract", "pca")).validate()
