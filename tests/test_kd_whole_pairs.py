"""The whole-batch loss over the pairs that hold an edit family's sentence (``--kd-whole-pairs families``):
random pairs left to each row's loss."""

from __future__ import annotations

import json
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
from staticsem.distillation.corpus.edits import EditSettings
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.stages.kd import Distillation, KDSettings, similarity_loss, train_kd
from staticsem.errors import InputError

TAU = 0.05


def among(student: torch.Tensor, teacher: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The cross-entropy of one distribution over the ordered pairs (i, j), i != j, that ``keep`` holds."""
    s, t = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    pairs = [(i, j) for i in range(len(s)) for j in range(len(s)) if i != j and keep[i, j]]
    target = torch.softmax(torch.stack([t[i] @ t[j] for i, j in pairs]) / TAU, dim=0)
    return -(target * torch.log_softmax(torch.stack([s[i] @ s[j] for i, j in pairs]) / TAU, dim=0)).sum()


def family_mask(inside: list[bool]) -> torch.Tensor:
    flags = torch.tensor(inside)
    return flags[:, None] | flags[None, :]


@pytest.mark.parametrize("seed", range(4))
def test_the_whole_term_ranks_only_the_pairs_of_the_mask(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    student, teacher = torch.randn(10, 6, generator=generator), torch.randn(10, 6, generator=generator)
    keep = family_mask([bool(x) for x in torch.rand(10, generator=generator) < 0.3] or [True])
    keep[0, 1] = keep[1, 0] = True  # at least one pair
    expected = similarity_loss(student, teacher, TAU) + 1.5 * among(student, teacher, keep)
    assert torch.allclose(similarity_loss(student, teacher, TAU, 1.5, keep), expected, atol=1e-4)


def test_a_random_pair_moves_the_whole_term_only_when_all_pairs_count() -> None:
    generator = torch.Generator().manual_seed(7)
    student, teacher = torch.randn(6, 4, generator=generator), torch.randn(6, 4, generator=generator)
    keep = family_mask([True, True, False, False, False, False])
    moved = teacher.clone()
    moved[4] = moved[5] + 0.01 * moved[4]  # the teacher's (4, 5): a pair of two random sentences
    rows = similarity_loss(student, moved, TAU) - similarity_loss(student, teacher, TAU)
    families = similarity_loss(student, moved, TAU, 1.0, keep) - similarity_loss(
        student, teacher, TAU, 1.0, keep
    )
    every = similarity_loss(student, moved, TAU, 1.0) - similarity_loss(student, teacher, TAU, 1.0)
    # 4 and 5 are no family's: their pair's own share leaves the families' term; their pairs with the family
    # rows stay in it (so it moves, but not by the all-pairs term's whole change)
    assert abs(every - rows) > abs(families - rows) + 1e-3


def test_all_pairs_in_the_mask_is_the_whole_batch_bit_for_bit_and_none_is_the_rows_loss() -> None:
    generator = torch.Generator().manual_seed(1)
    student, teacher = torch.randn(9, 5, generator=generator), torch.randn(9, 5, generator=generator)
    every = torch.ones(9, 9, dtype=torch.bool)
    assert torch.equal(
        similarity_loss(student, teacher, TAU, 2.0, every), similarity_loss(student, teacher, TAU, 2.0)
    )
    none = torch.zeros(9, 9, dtype=torch.bool)
    assert torch.equal(
        similarity_loss(student, teacher, TAU, 2.0, none), similarity_loss(student, teacher, TAU)
    )


def test_distillation_trains_on_the_pairs_holding_a_family_sentence_and_keeps_by_the_rows_loss(
    tiny_model: staticsem.StaticModel,
) -> None:
    rng = np.random.default_rng(5)
    sentences = random_sentences(list(tiny_model.vocab), 40, rng)
    targets = rng.normal(size=(40, 5)).astype(np.float32)
    table = torch.from_numpy(rng.normal(size=tiny_model.vectors.shape).astype(np.float32))
    families = [np.array([3, 4, 5]), np.array([20, 21])]
    rows = np.array([3, 4, 5, 9, 10, 20, 21, 30, 31, 32, 33])
    made = Distillation(
        tiny_model, sentences, targets, TAU, families=families, whole=1.0, whole_pairs="families"
    )
    every = Distillation(tiny_model, sentences, targets, TAU, families=families, whole=1.0)
    pooled, centred = made.bags.pool(table, rows, False), made.targets[rows]
    keep = family_mask([r in (3, 4, 5, 20, 21) for r in rows])
    expected = similarity_loss(pooled, centred, TAU) + among(pooled, centred, keep)
    assert made.loss(table, rows, False).item() == pytest.approx(expected.item(), rel=1e-4)
    rows_only = similarity_loss(pooled, centred, TAU).item()  # the dev loss that keeps the table
    assert made.batch_losses(table, [rows])[0] == pytest.approx(rows_only, rel=1e-5)
    assert every.loss(table, rows, False).item() != pytest.approx(expected.item(), rel=1e-3)


def build(folder: Path, teacher: FakeTeacher, pairs: str) -> tuple[staticsem.StaticModel, str]:
    base = tiny_swe(folder / "corpus.txt", fallback="prefix", kd_short=120, edit=EditSettings(sentences=30))
    settings = replace(base, kd=replace(base.kd, whole=1.0, whole_pairs=pairs))
    Pipeline(settings, folder / "model", teacher=teacher, show_progress=False, save_every=0.0).run("float32")  # type: ignore[arg-type]
    return staticsem.load(folder / "model"), json.loads((folder / ".model.work" / "kd.json").read_text())[
        "key"
    ]


def test_the_setting_reaches_the_build_and_reruns_only_its_distillation(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    every, key = build(tmp_path, FakeTeacher(subword_tokenizer), "all")
    teacher = FakeTeacher(subword_tokenizer)
    families, families_key = build(tmp_path, teacher, "families")
    assert teacher.sentences == 0 and families_key != key
    assert not np.allclose(families.vectors, every.vectors)
    again, again_key = build(tmp_path, FakeTeacher(subword_tokenizer), "all")
    assert again_key == key and np.array_equal(again.vectors, every.vectors)


# the KD key of `build`'s settings with --kd-whole 1 in the code before --kd-whole-pairs (2f808c7)
KD_KEY_BEFORE = "e92bf34e478f8659"


def test_all_pairs_keeps_the_kd_key_of_the_code_before_the_option(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    base = tiny_swe(tmp_path / "corpus.txt", fallback="prefix", kd_short=120, edit=EditSettings(sentences=30))
    teacher = FakeTeacher(subword_tokenizer)

    def kd_key(pairs: str) -> str:  # neighbour groups and patience as then (edits choose others now)
        settings = replace(
            base, kd=replace(base.kd, whole=1.0, whole_pairs=pairs, group_share=0.0, patience=5)
        )
        return Pipeline(settings, tmp_path / "model", teacher=teacher, show_progress=False).keys["kd"]  # type: ignore[arg-type]

    assert kd_key("all") == KD_KEY_BEFORE  # a finished build of before is reused, not redone
    assert kd_key("families") != KD_KEY_BEFORE


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kd": KDSettings(whole_pairs="some")}, "--kd-whole-pairs takes all or families, got 'some'"),
        (
            {"kd": KDSettings(whole=0.0, whole_pairs="families"), "edit": EditSettings(sentences=5)},
            "needs --kd-whole above 0",
        ),
        (
            {"kd": KDSettings(whole=1.0, whole_pairs="families"), "edit": EditSettings(sentences=0)},
            "edit families",
        ),
        (
            {"kd": KDSettings(whole=1.0, whole_pairs="families"), "edit": EditSettings(), "kd_short": 0},
            "edit families",
        ),
    ],
)
def test_families_without_a_whole_loss_or_without_edits_get_one_line(
    tmp_path: Path, changes: dict, message: str
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    with pytest.raises(InputError, match=message):
        tiny_swe(tmp_path / "corpus.txt", **{"kd_short": 120, **changes}).validate()
    tiny_swe(
        tmp_path / "corpus.txt",
        kd_short=120,
        kd=KDSettings(whole=1.0, whole_pairs="families"),
        edit=EditSettings(sentences=5),
    ).validate()


def test_training_plain_sentences_refuses_families_it_cannot_have() -> None:
    model = staticsem.StaticModel(["a", "b"], np.eye(2, dtype=np.float32))
    targets = np.eye(2, dtype=np.float32)
    with pytest.raises(InputError, match="needs edit families"):
        train_kd(model, ["a", "b"], targets, KDSettings(whole=1.0, whole_pairs="families"), False)


def test_the_command_line_refuses_an_unknown_value_before_any_work(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus.txt")
    args = ["distill", "--corpus", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, [*args, "--kd-whole", "1", "--kd-whole-pairs", "pairs"])
    assert result.exit_code == 2 and "--kd-whole-pairs takes all or families, got 'pairs'" in result.output
    assert not (tmp_path / "m").exists() and not (tmp_path / ".m.work").exists()
