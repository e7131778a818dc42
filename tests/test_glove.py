"""GloVe on small data: co-occurrence counts by hand, the loss by hand, training, seeds, resume, CLI."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from typer.testing import CliRunner

from staticsem import load
from staticsem.cli import app
from staticsem.distillation import distill
from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.methods.glove import train as glove_module
from staticsem.distillation.methods.glove.kernel import kernels
from staticsem.distillation.methods.glove.train import (
    GloveSettings,
    GloveTrainer,
    count_cooccurrences,
    distill_glove,
)
from staticsem.errors import InputError

VOCAB = ["a", "b", "c"]


def dense(sentences: list[list[str]], window: int, tmp_path: Path, **kwargs: int) -> np.ndarray:
    return count_cooccurrences(sentences, VOCAB, window, tmp_path / "parts", **kwargs).toarray()


def test_cooccurrences_by_hand(tmp_path: Path) -> None:
    # "a b c": a-b and b-c at distance 1 (1 each way), a-c at 2 (1/2 each way); "c a": c-a at 1.
    # The c ending one sentence and the c starting the next are not neighbours.
    x = dense([["a", "b", "c"], ["c", "a"]], 2, tmp_path)
    np.testing.assert_allclose(x, [[0, 1, 1.5], [1, 0, 1], [1.5, 1, 0]])
    # window 1 cuts a-c in the first sentence
    np.testing.assert_allclose(
        dense([["a", "b", "c"], ["c", "a"]], 1, tmp_path), [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    )
    # unknown words are dropped before the window is laid (a, b become neighbours); a word next to
    # itself counts both ways
    np.testing.assert_allclose(
        dense([["a", "zebra", "b"], ["c", "c"]], 1, tmp_path), [[0, 1, 0], [1, 0, 0], [0, 0, 2]]
    )


def test_spilled_parts_sum_to_the_in_memory_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(0)
    sentences = [[rng.choice(VOCAB + ["zebra"]) for _ in range(rng.randint(2, 9))] for _ in range(300)]
    whole = dense(sentences, 4, tmp_path)
    monkeypatch.setattr(glove_module, "_CHUNK_TOKENS", 7)  # a chunk every few sentences
    saved: list[Path] = []
    real = glove_module._save_npz
    monkeypatch.setattr(glove_module, "_save_npz", lambda path, m: (saved.append(path), real(path, m)))
    parts = dense(sentences, 4, tmp_path, max_pairs=2)  # every chunk spills
    assert len(saved) > 10 and not any(p.exists() for p in saved)  # spilled, merged, removed
    np.testing.assert_allclose(parts, whole)
    assert whole.sum() > 0 and np.allclose(whole, whole.T)


def test_one_record_updates_as_the_reference_code_does() -> None:
    """glove.c: η·g / √G for each vector component then G += (η·g)², the biases fdiff / √G_b (no η)."""
    rng = np.random.default_rng(0)
    w, w_context = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 3)).astype(np.float32)
    b, b_context = np.array([0.5, -0.5], np.float32), np.array([0.0, 1.0], np.float32)
    sums = [np.full_like(t, g) for t, g in ((w, 2.0), (w_context, 3.0), (b, 4.0), (b_context, 5.0))]
    before = [t.astype(np.float64) for t in (w, w_context, b, b_context, *sums)]
    rows, cols, counts = np.array([1], np.int32), np.array([0], np.int32), np.array([50.0], np.float32)
    cost = kernels()[0](rows, cols, counts, w, w_context, b, b_context, *sums, 0.05, 100.0, 0.75, 0, 1)
    w0, c0, b0, bc0, gw, gc, gb, gbc = before
    diff = w0[1] @ c0[0] + b0[1] + bc0[0] - math.log(50)
    fdiff = 0.5**0.75 * diff  # f(50) = (50 / 100)^0.75
    assert cost == pytest.approx(fdiff * diff, rel=1e-5)
    t1, t2 = fdiff * c0[0] * 0.05, fdiff * w0[1] * 0.05
    np.testing.assert_allclose(w[1], w0[1] - t1 / np.sqrt(gw[1]), rtol=1e-5)
    np.testing.assert_allclose(w_context[0], c0[0] - t2 / np.sqrt(gc[0]), rtol=1e-5)
    np.testing.assert_allclose(sums[0][1], gw[1] + t1**2, rtol=1e-5)
    np.testing.assert_allclose(sums[1][0], gc[0] + t2**2, rtol=1e-5)
    assert b[1] == pytest.approx(b0[1] - fdiff / 2.0, rel=1e-5)  # √4, and no η
    assert b_context[0] == pytest.approx(bc0[0] - fdiff / math.sqrt(5.0), rel=1e-5)
    assert sums[2][1] == pytest.approx(4.0 + fdiff**2, rel=1e-5)
    np.testing.assert_array_equal(w[0], w0[0])  # other rows untouched
    np.testing.assert_array_equal(w_context[1], c0[1])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three topics whose words share sentences with each other and with filler words; three sentences
    in ten carry one word of any topic (GloVe fits only the non-zero counts: without rare cross-topic
    pairs, nothing ties words of different topics down, and their cosines come out arbitrary)."""
    rng = random.Random(1)
    topics = [
        ["cat", "dog", "pet", "kitten"],
        ["king", "queen", "crown", "palace"],
        ["bread", "soup", "apple", "cheese"],
    ]
    lines = []
    for _ in range(600):
        topic = rng.choice(topics)
        words = [rng.choice(topic) if rng.random() < 0.6 else rng.choice(["the", "of"]) for _ in range(8)]
        if rng.random() < 0.3:
            words[rng.randrange(8)] = rng.choice(rng.choice(topics))
        lines.append(" ".join(words))
    path = tmp_path_factory.mktemp("glove") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SMALL = GloveSettings(dim=8, window=4, min_count=2, epochs=6, lr=0.05, threads=1)


def train(corpus: Path, work: Path | None = None, settings: GloveSettings = SMALL, **kwargs):  # type: ignore[no-untyped-def]
    return distill_glove([str(corpus)], settings=settings, work_dir=work, show_progress=False, **kwargs)


def test_training_lowers_the_loss_and_groups_topics(corpus: Path) -> None:
    costs: list[float] = []
    model = train(
        corpus,
        settings=GloveSettings(dim=8, window=4, min_count=2, epochs=25, x_max=10),
        after_epoch=lambda epoch, cost: costs.append(cost),
    )
    assert len(costs) == 25 and costs[-1] < 0.5 * costs[0]
    assert all(later <= earlier * 1.05 for earlier, later in zip(costs, costs[1:], strict=False))
    assert model.metadata["method"] == "glove" and model.metadata["cooccurrences"] > 0
    # GloVe's vectors share one large direction (the log-count baseline): compare them centred
    centred = model.vectors - model.vectors.mean(0)
    centred /= np.linalg.norm(centred, axis=1, keepdims=True)
    row = {word: centred[i] for i, word in enumerate(model.vocab)}
    same = np.mean([row["cat"] @ row[w] for w in ("dog", "pet", "kitten")])
    other = np.mean([row["cat"] @ row[w] for w in ("king", "queen", "crown", "bread", "soup", "apple")])
    assert same > other + 0.3, (same, other)


def test_the_saved_vectors_are_w_plus_the_trained_context_vectors(corpus: Path, tmp_path: Path) -> None:
    model = train(corpus, tmp_path / "work")
    state = load_file(str(tmp_path / "work" / "glove-training.safetensors"))
    np.testing.assert_array_equal(model.vectors, state["w"] + state["w_context"])  # the paper's w + w̃
    start = GloveTrainer(len(model.vocab), SMALL).tables  # the seeded initial tables
    moved = [np.linalg.norm(state[name] - start[k]) for k, name in enumerate(("w", "w_context"))]
    assert moved[1] > 0.5 * moved[0] > 0  # w̃ is trained as much as w
    assert np.linalg.norm(model.vectors - state["w"]) > 0.5 * np.linalg.norm(state["w"])  # not w alone


def test_same_seed_same_vectors(corpus: Path) -> None:
    one, two = train(corpus), train(corpus)
    np.testing.assert_array_equal(one.vectors, two.vectors)
    other = train(corpus, settings=GloveSettings(**{**SMALL.__dict__, "seed": 1}))
    assert not np.allclose(one.vectors, other.vectors)


class Stop(Exception):
    pass


def test_an_interrupted_run_resumes_where_it_stopped(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stop_after_two(epoch: int, cost: float) -> None:
        if epoch == 2:
            raise Stop

    with pytest.raises(Stop):
        train(corpus, tmp_path / "work", after_epoch=stop_after_two)
    epochs: list[int] = []

    def no_counting(*args: object, **kwargs: object) -> None:
        raise AssertionError("the co-occurrence matrix was counted again")

    monkeypatch.setattr(glove_module, "count_cooccurrences", no_counting)
    resumed = train(corpus, tmp_path / "work", after_epoch=lambda epoch, cost: epochs.append(epoch))
    assert epochs == [3, 4, 5, 6]
    monkeypatch.undo()
    np.testing.assert_array_equal(resumed.vectors, train(corpus).vectors)
    # other training settings: the counts are reused, training starts over
    epochs.clear()
    monkeypatch.setattr(glove_module, "count_cooccurrences", no_counting)
    train(
        corpus,
        tmp_path / "work",
        GloveSettings(**{**SMALL.__dict__, "epochs": 2}),
        after_epoch=lambda e, c: epochs.append(e),
    )
    assert epochs == [1, 2]


def test_distill_and_cli(corpus: Path, tmp_path: Path) -> None:
    model = distill(
        "glove", corpus=[str(corpus)], out=tmp_path / "api", dim=8, epochs=2, min_count=2, show_progress=False
    )
    assert load(tmp_path / "api").metadata["settings"]["epochs"] == 2 and model.dim == 8
    result = CliRunner().invoke(
        app,
        [
            "distill",
            "--method",
            "glove",
            "--corpus",
            str(corpus),
            "--out",
            str(tmp_path / "cli"),
            "--dim",
            "8",
            "--epochs",
            "2",
            "--window",
            "3",
            "--min-count",
            "2",
            "--max-sentences",
            "300",
        ],
    )
    assert result.exit_code == 0, result.output
    saved = load(tmp_path / "cli")
    assert saved.metadata["method"] == "glove" and saved.metadata["settings"]["window"] == 3
    assert saved.metadata["settings"]["corpus_options"]["max_sentences"] == 300
    assert {"numba", "numpy", "python"} <= set(saved.metadata["environment"])  # the build's arithmetic
    assert "fingerprint" in str(saved.metadata["corpus"]) or saved.metadata["corpus"]
    for folder in (tmp_path / "api", tmp_path / "cli"):  # every distilled folder carries its model card
        card = (folder / "README.md").read_text(encoding="utf-8")
        assert "library_name: staticsem" in card and "| method | glove |" in card
        assert f"`{load(folder).metadata['corpus'][0]['sha256'][:16]}`" in card


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 0}, "window must be positive"),
        ({"alpha": 1.5}, "alpha must be in"),
        ({"min_count": 10_000}, "no word occurs min_count=10000"),
        ({"nonsense": 1}, "unknown glove options: nonsense"),
    ],
)
def test_bad_settings_are_one_line_errors(corpus: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as error:
        distill("glove", corpus=[str(corpus)], dim=8, epochs=1, show_progress=False, **kwargs)
    assert "\n" not in str(error.value)


def test_corpus_options_reach_the_reader(corpus: Path) -> None:
    model = distill_glove(
        [str(corpus)], settings=SMALL, options=CorpusOptions(max_sentences=50), show_progress=False
    )
    assert model.metadata["settings"]["corpus_options"]["max_sentences"] == 50
