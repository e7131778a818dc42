"""The training loop every stage shares (``stages.training.train_table``): what it keeps when the dev split is
too small, that a diverged run is an error, and which checkpoints it resumes (only its own settings' and
data's: the pairs' anchor by content, a distillation's by its settings)."""

from __future__ import annotations

import gzip
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from fakes import TINY_SWE, FakeTeacher, pair_topic_model, topic_pairs, write_corpus
from staticsem import StaticModel, load
from staticsem.cli import app
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.stages.kd import Distillation, KDSettings
from staticsem.distillation.stages.pairs import Anchor, Ranking, train_pairs
from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.distillation.stages.training import MIN_DEV, Objective, train_table
from staticsem.errors import InputError, StaticsemError


def interrupt_after(monkeypatch: pytest.MonkeyPatch, objective: type[Objective], calls: int) -> Any:
    """``objective``'s loss raises ``KeyboardInterrupt`` after ``calls`` calls; returns the real loss."""
    real, made = objective.loss, []

    def stopping(self: Objective, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        made.append(1)
        if len(made) > calls:
            raise KeyboardInterrupt
        return real(self, table, rows, sparse)

    monkeypatch.setattr(objective, "loss", stopping)
    return real


LOOP = KDSettings(batch_size=32, eval_every=5, patience=100, max_steps=40, dev_size=40, lr=0.02)
TRAINING_LOG = "staticsem.distillation.stages.training"


@pytest.fixture()
def model() -> StaticModel:
    return pair_topic_model()


def ranking(model: StaticModel, seed: int = 8) -> Ranking:
    return Ranking(model, topic_pairs(400, seed=seed), None, 0.05)


class Stopping(Objective):
    """Wraps an objective: raises KeyboardInterrupt (a kill) after ``after`` training losses; from dev
    evaluation ``nan_from`` on, its dev losses are NaN (a diverged run)."""

    def __init__(self, inner: Objective, after: int | None = None, nan_from: int | None = None) -> None:
        self.inner, self.after, self.nan_from = inner, after, nan_from
        self.name, self.size, self.weight = inner.name, inner.size, inner.weight
        self.calls = self.evaluations = 0

    def usable(self) -> np.ndarray:
        return self.inner.usable()

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        self.calls += 1
        if self.after is not None and self.calls > self.after:
            raise KeyboardInterrupt
        return self.inner.loss(table, rows, sparse)

    def batch_losses(self, table: torch.Tensor, batches) -> list[float]:  # type: ignore[no-untyped-def]
        self.evaluations += 1
        losses = self.inner.batch_losses(table, batches)
        if self.nan_from is not None and self.evaluations >= self.nan_from:
            return [float("nan")] * len(losses)
        return losses


class Recording(Stopping):
    """Records each dev evaluation's mean loss (``scores``) and the dev batches it scored (``dev``)."""

    def __init__(self, inner: Objective, after: int | None = None) -> None:
        super().__init__(inner, after)
        self.scores: list[float] = []
        self.dev: list[np.ndarray] = []

    def batch_losses(self, table: torch.Tensor, batches) -> list[float]:  # type: ignore[no-untyped-def]
        losses = super().batch_losses(table, batches)
        self.scores.append(float(np.mean(losses)))
        self.dev = list(batches)
        return losses


# ---------------------------------------------------------------------------------------------- dev split
@pytest.mark.parametrize("dev_size", [0, 1])
def test_a_dev_split_under_two_examples_trains_every_step_and_keeps_the_last_table(
    model: StaticModel, dev_size: int, caplog: pytest.LogCaptureFixture
) -> None:
    settings = replace(LOOP, dev_size=dev_size, max_steps=30)
    with caplog.at_level(logging.WARNING, logger=TRAINING_LOG):
        trained, stats = train_table(model, [ranking(model)], settings, False)
    assert "training runs all 30 steps without early stopping and keeps the last table" in caplog.text
    assert stats["steps"] == 30 and stats["dev_loss_start"] is None and stats["dev_loss_best"] is None
    assert np.abs(trained.vectors - model.vectors).max() > 0.1  # trained, not the start kept
    # the last table: one step fewer ends elsewhere
    shorter, _ = train_table(model, [ranking(model)], replace(settings, max_steps=29), False)
    assert not np.array_equal(trained.vectors, shorter.vectors)


def test_a_dev_split_of_exactly_min_dev_examples_keeps_early_stopping(
    model: StaticModel, caplog: pytest.LogCaptureFixture
) -> None:
    """``MIN_DEV`` examples are enough for a dev loss: it is scored, training stops after ``patience``
    evaluations without a better one, and the table kept is the best evaluation's."""
    objective = Recording(ranking(model))
    settings = replace(LOOP, dev_size=MIN_DEV, lr=0.3, max_steps=200, patience=2)
    with caplog.at_level(logging.WARNING, logger=TRAINING_LOG):
        trained, stats = train_table(model, [objective], settings, False)
    assert "without early stopping" not in caplog.text
    assert stats["pairs_dev"] == MIN_DEV and len(objective.dev) == 1 and len(objective.dev[0]) == MIN_DEV
    assert stats["steps"] < 200 and len(objective.scores) == 1 + stats["steps"] // 5  # stopped early
    best = min(objective.scores)
    assert stats["dev_loss_start"] == objective.scores[0] and stats["dev_loss_best"] == pytest.approx(best)
    assert all(score > best for score in objective.scores[-2:])  # the last two evaluations were no better
    with torch.no_grad():
        kept = objective.inner.batch_losses(torch.from_numpy(trained.vectors), objective.dev)
    assert float(np.mean(kept)) == pytest.approx(best, abs=1e-5)


def test_train_pairs_without_a_dev_split_learns_and_says_so(model: StaticModel, tmp_path: Path) -> None:
    """As a new user tried it: ``--pairs-dev-size 0`` once wrote the untrained rows after "dev loss nan"."""
    model.save(tmp_path / "base")
    pairs = topic_pairs(400, seed=9)
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{q}\t{p}\n" for q, p in zip(pairs.queries, pairs.positives, strict=True)))
    result = CliRunner().invoke(
        app,
        [
            "train-pairs",
            str(tmp_path / "base"),
            "--pairs",
            str(path),
            "--out",
            str(tmp_path / "search"),
            "--pairs-dev-size",
            "0",
            "--pairs-max-steps",
            "20",
            "--pairs-batch-size",
            "32",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "20 steps, no dev split: the last table" in result.output
    assert "nan" not in result.output
    trained = load(tmp_path / "search")
    start = load(tmp_path / "base").encode_query(pairs.queries[:50])  # the same float16 rows
    assert np.abs(trained.encode_query(pairs.queries[:50]) - start).max() > 0.02


def test_training_returns_the_table_of_the_best_dev_loss_not_the_last(model: StaticModel) -> None:
    """The kept table is held in place (copied into, not cloned): it must stay the best evaluation's table
    while training goes on moving the trained one."""

    objective = Recording(ranking(model))
    settings = replace(LOOP, lr=0.3, max_steps=60)  # a rate too high: the dev loss falls, then climbs
    trained, stats = train_table(model, [objective], settings, False)
    best = min(objective.scores)
    assert objective.scores[-1] > best + 1e-3 and best < objective.scores[0]  # the last is not the best
    assert stats["dev_loss_best"] == pytest.approx(best, abs=1e-9)
    with torch.no_grad():
        kept = objective.inner.batch_losses(torch.from_numpy(trained.vectors), objective.dev)
    assert float(np.mean(kept)) == pytest.approx(best, abs=1e-5)


def test_a_dev_loss_that_is_not_a_number_is_an_error(model: StaticModel) -> None:
    diverging = Stopping(ranking(model), nan_from=3)
    with pytest.raises(StaticsemError, match="training diverged: the dev loss is nan at step 10"):
        train_table(model, [diverging], LOOP, False)
    with pytest.raises(StaticsemError, match="the dev loss is nan at step 0"):
        train_table(model, [Stopping(ranking(model), nan_from=1)], LOOP, False)


def test_training_settings_that_cannot_train_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--kd-batch-size must be at least 2"):
        KDSettings(batch_size=1).validate()
    with pytest.raises(InputError, match="--kd-max-steps and --kd-dev-size take values >= 0"):
        KDSettings(dev_size=-1).validate()
    corpus = write_corpus(tmp_path / "corpus.txt", count=50)
    with pytest.raises(InputError, match="--kd-lr and --kd-clip must be positive"):
        SWESettings(corpus=(str(corpus),), kd=KDSettings(lr=0.0)).validate()


# ---------------------------------------------------------------------------------------------- checkpoints
def test_a_checkpoint_made_under_other_settings_is_not_resumed(
    model: StaticModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint, other = tmp_path / "state.safetensors", replace(LOOP, lr=0.05)
    with pytest.raises(KeyboardInterrupt):
        train_table(
            model, [Stopping(ranking(model), after=23)], LOOP, False, checkpoint=checkpoint, key="lr 0.02",
            save_every=0,
        )  # fmt: skip
    assert checkpoint.is_file()
    fresh, _ = train_table(model, [ranking(model)], other, False)
    with caplog.at_level(logging.INFO, logger=TRAINING_LOG):
        again, stats = train_table(
            model, [ranking(model)], other, False, checkpoint=checkpoint, key="lr 0.05", save_every=0
        )
    assert "was written by other settings or data: training starts over" in caplog.text
    assert "training resumes" not in caplog.text and stats["steps"] == 40
    np.testing.assert_array_equal(again.vectors, fresh.vectors)


def test_a_resumed_training_keeps_the_best_table_saved_before_the_stop_not_the_last(
    model: StaticModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopped at step 45 of a run whose dev loss bottomed out before and climbed since (a rate too high),
    the resumed run ends on the uninterrupted run's table: the best one, saved before the stop, not the
    last one trained."""
    checkpoint, settings = tmp_path / "state.safetensors", replace(LOOP, lr=0.3, max_steps=60)
    uninterrupted = Recording(ranking(model))
    fresh, fresh_stats = train_table(model, [uninterrupted], settings, False)
    best_at = 5 * uninterrupted.scores.index(min(uninterrupted.scores))
    assert 0 < best_at < 45 and min(uninterrupted.scores[10:]) > min(uninterrupted.scores) + 1e-3
    with pytest.raises(KeyboardInterrupt):
        train_table(
            model, [Recording(ranking(model), after=45)], settings, False, checkpoint=checkpoint, key="k",
            save_every=0,
        )  # fmt: skip
    with caplog.at_level(logging.INFO, logger=TRAINING_LOG):
        again, stats = train_table(
            model, [ranking(model)], settings, False, checkpoint=checkpoint, key="k", save_every=0
        )
    assert "training resumes at step 45" in caplog.text
    assert stats["dev_loss_best"] == fresh_stats["dev_loss_best"]
    np.testing.assert_array_equal(again.vectors, fresh.vectors)


def test_an_interrupted_distillation_rerun_with_other_settings_starts_over(
    tmp_path: Path,
    subword_tokenizer: object,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The claim at the build's level: KD stopped mid-way under ``--kd-lr`` a, rerun with b, ends on the
    model a fresh build with b makes (a shared stage 1, its checkpoint not resumed)."""
    corpus = write_corpus(tmp_path / "corpus.txt", count=800)
    teacher = FakeTeacher(subword_tokenizer)  # type: ignore[arg-type]
    loop = KDSettings(lr=1e-2, batch_size=32, eval_every=5, patience=100, max_steps=40, dev_size=60)

    def build(out: str, lr: float, work: str) -> StaticModel:
        settings = SWESettings(
            corpus=(str(corpus),), vocab_size=40, **TINY_SWE, kd=replace(loop, lr=lr), kd_short=0,
            fallback="prefix",
        )  # type: ignore[arg-type]  # fmt: skip
        return Pipeline(
            settings, tmp_path / out, teacher=teacher, show_progress=False, save_every=0.0,  # type: ignore[arg-type]
            work_dir=tmp_path / work,
        ).run(dtype="float32")  # fmt: skip

    real = interrupt_after(monkeypatch, Distillation, 23)
    with pytest.raises(KeyboardInterrupt):
        build("a", 1e-2, ".shared.work")
    assert (tmp_path / ".shared.work" / "kd.partial.safetensors").is_file()
    monkeypatch.setattr(Distillation, "loss", real)
    with caplog.at_level(logging.INFO, logger=TRAINING_LOG):
        rerun = build("b", 3e-2, ".shared.work")
    assert "training starts over" in caplog.text and "training resumes" not in caplog.text
    np.testing.assert_array_equal(rerun.vectors, build("fresh", 3e-2, ".fresh.work").vectors)


@pytest.mark.parametrize("changed", ["sentences", "targets", "both"])
def test_the_pairs_checkpoint_resumes_only_the_same_anchor(
    model: StaticModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    changed: str,
) -> None:
    """Two anchors of the same size, their sentences or their targets (or both) different, the rest the
    same: a stopped training under one is not resumed under the other."""
    rng = np.random.default_rng(3)
    sentences = [" ".join(rng.choice(model.vocab, 4)) for _ in range(400)]
    first = Anchor(sentences, rng.normal(size=(400, 8)).astype(np.float32))
    others = [*sentences[:-1], " ".join(rng.choice(model.vocab, 5))]  # the last sentence another
    moved = first.targets.copy()
    moved[-1, -1] += 0.5  # one number of the last target another
    second = Anchor(
        others if changed != "targets" else sentences, moved if changed != "sentences" else first.targets
    )
    assert first.digest() == Anchor(list(sentences), first.targets.copy()).digest()
    assert first.digest() != second.digest()
    assert Anchor(["ab", "c"], first.targets).digest() != Anchor(["a", "bc"], first.targets).digest()
    pairs = topic_pairs(400, seed=9)
    settings = PairsSettings(
        batch_size=32, max_steps=40, eval_every=5, patience=100, dev_size=40, lr=0.02, anchor_weight=1.0,
        into="all",
    )  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    real = interrupt_after(monkeypatch, Ranking, 23)
    with pytest.raises(KeyboardInterrupt):
        train_pairs(model, pairs, settings, first, work, False, save_every=0)
    assert (work / "pairs-training.safetensors").is_file()
    monkeypatch.setattr(Ranking, "loss", real)
    fresh, _ = train_pairs(model, pairs, settings, second, None, False)
    with caplog.at_level(logging.INFO, logger=TRAINING_LOG):
        again, _ = train_pairs(model, pairs, settings, second, work, False, save_every=0)
    assert "training starts over" in caplog.text
    np.testing.assert_array_equal(again.vectors, fresh.vectors)


def test_train_pairs_drops_the_pairs_its_exclude_lists_end_to_end(model: StaticModel, tmp_path: Path) -> None:
    from staticsem.distillation.corpus.exclude import sentence_hash

    model.save(tmp_path / "base")
    pairs = topic_pairs(400, seed=9)
    rows = list(dict.fromkeys(zip(pairs.queries, pairs.positives, strict=True)))
    path = tmp_path / "pairs.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{q}\t{p}\n" for q, p in rows))
    query, positive = rows[0][0], rows[5][1]  # one listed query, one listed passage
    listed = tmp_path / "eval.sha1"
    listed.write_text(f"{sentence_hash(query)}\n{sentence_hash(positive)}\n")
    hit = sum(q == query or p == positive for q, p in rows)
    result = CliRunner().invoke(
        app,
        [
            "train-pairs", str(tmp_path / "base"), "--pairs", str(path), "--out", str(tmp_path / "search"),
            "--exclude", str(listed), "--pairs-max-steps", "10", "--pairs-batch-size", "32", "--no-progress",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    record = load(tmp_path / "search").metadata["pairs"]
    assert record["dropped"] == {"excluded": hit} and hit >= 2
    assert record["pairs"] == {"pairs.tsv.gz": len(rows) - hit}
