"""The alignment's own settings (--align-components, --align-lr) and the pieces' weight of a build of
several languages: what each changes, what keeps the models before them, what is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeTeacher
from staticsem.distillation.methods.swe import alignment
from staticsem.distillation.methods.swe.settings import SWESettings
from staticsem.distillation.stages.align_settings import AlignSettings
from test_multilingual import ALIGN, ALIGN_BEFORE, TRAINING, pipeline, reader, write_three


@pytest.fixture()
def three(tmp_path: Path) -> Path:
    return write_three(tmp_path)


def test_the_maps_targets_and_refinement_take_the_alignment_settings(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {"targets": set()}
    maps, targets, refine = alignment.fit_language_maps, alignment.shared_targets, alignment.train_table

    def fit_maps(model, samples, components, space):  # type: ignore[no-untyped-def]
        seen["maps"] = components
        return maps(model, samples, components, space)

    def shared(space, teacher, components):  # type: ignore[no-untyped-def]
        seen["targets"].add(components)
        return targets(space, teacher, components)

    def train(model, objectives, settings, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["lr"], seen["steps"] = settings.lr, settings.max_steps
        seen["kd"] = (settings.batch_size, settings.patience, settings.eval_every, settings.dev_size)
        return refine(model, objectives, settings, *args, **kwargs)

    monkeypatch.setattr(alignment, "fit_language_maps", fit_maps)
    monkeypatch.setattr(alignment, "shared_targets", shared)
    monkeypatch.setattr(alignment, "train_table", train)
    align = replace(ALIGN, components=2, lr=3e-3, steps=40)
    run = pipeline(three, FakeTeacher(reader(three)), kd_short=0, align=align)
    run.run(dtype="float32")
    kd = (TRAINING.batch_size, TRAINING.patience, TRAINING.eval_every, TRAINING.dev_size)
    assert seen == {"maps": 2, "targets": {2}, "lr": 3e-3, "steps": 40, "kd": kd}
    assert run.records["align"]["components"] == 2
    # the rate and the cap are the alignment's own; the rest of the training comes from --kd-*
    assert (TRAINING.lr, TRAINING.max_steps) != (3e-3, 40) and kd != (128, 5, 40, 10_000)


def test_by_default_a_build_removes_a_quarter_of_its_dimensions_at_most(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    maps = alignment.fit_language_maps

    def fit_maps(model, samples, components, space):  # type: ignore[no-untyped-def]
        seen.append(components)
        return maps(model, samples, components, space)

    monkeypatch.setattr(alignment, "fit_language_maps", fit_maps)
    run = pipeline(three, FakeTeacher(reader(three)), kd_short=0, align=replace(ALIGN, components=None))
    run.run(dtype="float32")
    assert seen == [2] and run.records["align"]["components"] == 2  # 8 dimensions here: 8 // 4


def test_the_alignment_key_holds_the_settings_only_where_they_differ_from_before(three: Path) -> None:
    teacher = FakeTeacher(reader(three))

    def keys(**align: Any) -> dict[str, str]:
        return pipeline(three, teacher, hand_over=False, align=replace(ALIGN, **align)).keys

    before = keys()
    assert before["align"] == ALIGN_BEFORE  # 4 components, the refinement at the distillation's rate
    assert keys(components=None)["align"] != ALIGN_BEFORE  # the default removes 2 of 8 dimensions here
    default = AlignSettings().key("stage", 0, 1e-3, 256)
    assert default["components"] == 6 and default["lr"] == 5e-4
    assert "components" not in replace(AlignSettings(), components=4).key("stage", 0, 1e-3, 256)
    for change in ({"components": 2}, {"lr": 3e-3}):
        changed = keys(**change)
        assert {step for step in before if before[step] != changed[step]} == {"align"}, change
    assert len({keys(components=2)["align"], keys(lr=3e-3)["align"], before["align"]}) == 3


def test_the_defaults_are_the_new_alignment() -> None:
    align = SWESettings().align
    assert (align.directions(256), align.lr, align.steps, align.sentences) == (6, 5e-4, 30_000, 20_000)
    assert (align.directions(16), align.directions(6), replace(align, components=5).directions(16)) == (
        4,
        1,
        5,
    )


@pytest.mark.parametrize(
    ("corpus", "asked", "weight"),
    [
        (("a.txt",), None, 0.5),
        (("en=a.txt",), None, 0.5),
        (("en=a.txt", "de=b.txt"), None, 1.0),
        (("en=a.txt", "de=b.txt", "ja=c.txt"), None, 1.0),
        (("en=a.txt", "de=b.txt"), 0.25, 0.25),
        (("en=a.txt",), 0.75, 0.75),
        (("a.txt", "b.txt"), None, 0.5),  # two files of one language
        (("en=a.txt", "en=b.txt"), None, 0.5),
    ],
)
def test_the_pieces_count_whole_by_default_in_a_build_of_several_languages(
    corpus: tuple[str, ...], asked: float | None, weight: float
) -> None:
    assert SWESettings(corpus=corpus, piece_weight=asked).pieces_weight() == weight


def test_languages_named_without_tags_count_too() -> None:
    assert SWESettings(corpus=("mixed.txt",), languages=("en", "de")).pieces_weight() == 1.0
