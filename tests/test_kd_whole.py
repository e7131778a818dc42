"""The whole-batch distillation loss (``--kd-whole``): every pair of a batch ranked as the teacher ranks it,
beside each row's own distribution."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import FakeTeacher, random_sentences, tiny_swe, write_corpus
from staticsem.cli import app
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.methods.swe.settings import SWESettings
from staticsem.distillation.stages.kd import Distillation, KDSettings, similarity_loss
from staticsem.errors import InputError

TAU = 0.05


def pair(seed: int = 0, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, 8, generator=generator), torch.randn(size, 8, generator=generator)


def by_rows(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Each row's cross-entropy, written out: row i's distribution over the other rows."""
    s, t = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    losses = []
    for i in range(len(s)):
        others = [j for j in range(len(s)) if j != i]
        target = torch.softmax(t[others] @ t[i] / TAU, dim=0)
        losses.append(-(target * torch.log_softmax(s[others] @ s[i] / TAU, dim=0)).sum())
    return torch.stack(losses).mean()


def by_pairs(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """The cross-entropy of one distribution over every ordered pair (i, j), i != j, of the batch."""
    s, t = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    pairs = [(i, j) for i in range(len(s)) for j in range(len(s)) if i != j]
    target = torch.softmax(torch.stack([t[i] @ t[j] for i, j in pairs]) / TAU, dim=0)
    return -(target * torch.log_softmax(torch.stack([s[i] @ s[j] for i, j in pairs]) / TAU, dim=0)).sum()


def test_without_whole_the_loss_is_the_formula_of_before_bit_for_bit() -> None:
    for seed in range(20):
        student, teacher = pair(seed, 16 + seed)
        s, t = F.normalize(student, dim=1), F.normalize(teacher, dim=1)  # the loss before --kd-whole
        eye = torch.eye(len(s), dtype=torch.bool)
        target = torch.softmax((t @ t.T / TAU).masked_fill(eye, float("-inf")), dim=1)
        log_probs = torch.log_softmax((s @ s.T / TAU).masked_fill(eye, float("-inf")), dim=1)
        before = -(target * log_probs.masked_fill(eye, 0.0)).sum(dim=1).mean()
        assert torch.equal(similarity_loss(student, teacher, TAU), before)


def test_without_whole_the_loss_is_each_rows_cross_entropy() -> None:
    student, teacher = pair()
    assert torch.allclose(similarity_loss(student, teacher, TAU), by_rows(student, teacher), atol=1e-5)
    assert torch.equal(similarity_loss(student, teacher, TAU, 0.0), similarity_loss(student, teacher, TAU))


@pytest.mark.parametrize("whole", [0.5, 2.0])
def test_whole_adds_the_cross_entropy_over_all_pairs_at_its_weight(whole: float) -> None:
    student, teacher = pair(1)
    expected = by_rows(student, teacher) + whole * by_pairs(student, teacher)
    assert torch.allclose(similarity_loss(student, teacher, TAU, whole), expected, atol=1e-4)


def test_the_whole_term_ranks_pairs_that_no_row_compares() -> None:
    # four sentences, two tight pairs: the teacher has (0, 1) far closer than (2, 3). A student with both
    # pairs equally close gives every row the teacher's order, so the rows' loss barely tells them apart;
    # the whole batch's loss prefers the student that ranks (0, 1) above (2, 3) as the teacher does
    teacher = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.05, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.6]])
    level = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.3, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.3]])
    ranked = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.05, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.6]])
    rows = similarity_loss(level, teacher, TAU) - similarity_loss(ranked, teacher, TAU)
    whole = similarity_loss(level, teacher, TAU, 1.0) - similarity_loss(ranked, teacher, TAU, 1.0)
    assert whole - rows > 10 * abs(rows)


def test_training_and_dev_losses_both_carry_the_whole_term(tiny_model: staticsem.StaticModel) -> None:
    rng = np.random.default_rng(3)
    sentences = random_sentences(list(tiny_model.vocab), 40, rng)
    targets = rng.normal(size=(40, 5)).astype(np.float32)
    table = torch.from_numpy(rng.normal(size=tiny_model.vectors.shape).astype(np.float32))
    rows = np.arange(0, 40, 2)
    plain = Distillation(tiny_model, sentences, targets, TAU)
    whole = Distillation(tiny_model, sentences, targets, TAU, whole=1.5)
    pooled, centred = plain.bags.pool(table, rows, False), plain.targets[rows]
    expected = similarity_loss(pooled, centred, TAU) + 1.5 * by_pairs(pooled, centred)
    assert whole.loss(table, rows, False).item() == pytest.approx(expected.item(), rel=1e-4)
    assert whole.batch_losses(table, [rows])[0] == pytest.approx(expected.item(), rel=1e-4)
    assert plain.batch_losses(table, [rows])[0] < expected.item()


def build(folder: Path, teacher: FakeTeacher, whole: float) -> tuple[staticsem.StaticModel, str]:
    kd = replace(tiny_swe(folder / "corpus.txt").kd, whole=whole)
    settings = tiny_swe(folder / "corpus.txt", fallback="prefix", kd=kd)
    Pipeline(settings, folder / "model", teacher=teacher, show_progress=False, save_every=0.0).run("float32")  # type: ignore[arg-type]
    key = json.loads((folder / ".model.work" / "kd.json").read_text())["key"]
    return staticsem.load(folder / "model"), key


def test_kd_whole_reaches_the_build_and_counts_in_its_key_only_when_set(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    plain, key = build(tmp_path, FakeTeacher(subword_tokenizer), 0.0)
    pca = json.loads((tmp_path / ".model.work" / "pca.json").read_text())
    teacher = FakeTeacher(subword_tokenizer)
    whole, whole_key = build(tmp_path, teacher, 2.0)
    assert whole_key != key and not np.allclose(whole.vectors, plain.vectors)
    assert teacher.sentences == 0  # only the distillation reran: no teacher pass, the PCA as it was
    assert json.loads((tmp_path / ".model.work" / "pca.json").read_text()) == pca
    again, again_key = build(tmp_path, FakeTeacher(subword_tokenizer), 0.0)
    assert again_key == key and np.array_equal(again.vectors, plain.vectors)


@pytest.mark.parametrize("weight", [-0.5, float("inf"), float("nan")])
def test_a_weight_below_0_or_not_finite_gets_one_line_before_any_work(tmp_path: Path, weight: float) -> None:
    with pytest.raises(InputError, match=f"--kd-whole takes a weight >= 0, got {weight}"):
        tiny_swe(tmp_path / "corpus.txt", kd=KDSettings(whole=weight)).validate()


def test_the_command_line_sets_the_weight_and_refuses_a_bad_one(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus.txt")
    args = ["distill", "--corpus", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, [*args, "--kd-whole", "-0.5"])
    assert result.exit_code == 2 and "--kd-whole takes a weight >= 0, got -0.5" in result.output
    assert not (tmp_path / "m").exists() and not (tmp_path / ".m.work").exists()
    seen: list[float] = []
    with pytest.MonkeyPatch.context() as patch:  # the parsed settings, stopped before any work
        patch.setattr(SWESettings, "validate", lambda self: seen.append(self.kd.whole) or sys.exit(3))
        assert CliRunner().invoke(app, [*args, "--kd-whole", "1.5"]).exit_code == 3
    assert seen == [1.5]
