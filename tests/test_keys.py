"""The keys of an SWE build's steps (``methods/swe/keys.py``): a setting changes the key of the step that
reads it and of every step after it, and of none before it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.distillation.corpus.edits import EditSettings
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.methods.swe.settings import SWESettings

EDITS = EditSettings(sentences=20)


def keys(settings: SWESettings, folder: Path, tokenizer: Tokenizer) -> dict[str, str]:
    return Pipeline(settings, folder / "m", teacher=FakeTeacher(tokenizer), show_progress=False).keys  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        ({"dim": 4}, {"pca", "edits", "kd", "search"}),  # the copies' neighbours come from the PCA'd table
        ({"kd.tau": 0.07}, {"kd", "search"}),
        ({"kd.lr": 0.002}, {"kd", "search"}),
        ({"kd.whole": 0.5}, {"kd"}),  # the search rows train as without families: no whole-batch term
        ({"kd.patience": 3}, {"kd"}),
        ({"edit.share": 0.3}, {"kd"}),  # how the families train, not what they are
        ({"edit.neighbours": 3}, {"edits", "kd"}),
        ({"kd_short": 50}, {"targets", "edits", "kd", "search"}),
        ({"sentences_per_word": 20}, {"select", "extract", "pca", "targets", "edits", "kd", "search"}),
        ({"min_count": 3}, {"vocab", "select", "extract", "pca", "targets", "edits", "kd", "search"}),
    ],
)
def test_a_setting_moves_its_steps_key_and_those_after_it_only(
    tmp_path: Path, subword_tokenizer: Tokenizer, change: dict[str, object], moved: set[str]
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    base = tiny_swe(tmp_path / "corpus.txt", kd_short=120, edit=EDITS)
    ((name, value),) = change.items()
    part, _, field = name.rpartition(".")
    if part:  # a field of the KD or edit settings
        changed = replace(base, **{part: replace(getattr(base, part), **{field: value})})
    else:
        changed = replace(base, **change)
    before, after = keys(base, tmp_path, subword_tokenizer), keys(changed, tmp_path, subword_tokenizer)
    assert (
        set(before) == set(after) >= {"vocab", "select", "extract", "pca", "targets", "edits", "kd", "search"}
    )
    assert {step for step in before if before[step] != after[step]} == moved
