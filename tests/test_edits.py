"""Edited copies of short sentences (``--edit-sentences``): the edits, the step, the families' batches."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import Tokenizer

import staticsem
from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.distillation.corpus.edits import EditSettings, edit_families, edited, nearest_words
from staticsem.distillation.methods.swe.edit_step import with_edits
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.stages.kd import KDSettings
from staticsem.distillation.stages.training import Objective, _Split
from staticsem.errors import InputError

NEAR = {"man": ["woman", "boy"], "playing": ["holding"], "guitar": ["piano", "violin"], "street": ["road"]}


def test_each_kind_makes_its_one_edit() -> None:
    sentence = "A man is playing a guitar in the street ."
    for seed in range(20):
        drop, swap, negate = edited(sentence, NEAR, ("drop", "swap", "negate"), random.Random(seed))
        words, dropped = sentence.split(" "), drop.split(" ")
        assert len(dropped) == len(words) - 1
        gone = [w for w in words if w not in dropped]
        assert gone and gone[0] in NEAR  # one editable word left out, nothing else
        changed = [(a, b) for a, b in zip(words, swap.split(" "), strict=True) if a != b]
        assert len(changed) == 1 and changed[0][1] in NEAR[changed[0][0]]
        assert negate == "A man is not playing a guitar in the street ."
    negated = edited("Not now , he is not here .", NEAR, ("negate",), random.Random(0))
    assert negated == ["Not now , he is here ."]
    assert edited("Guitar music .", NEAR, ("swap",), random.Random(0))[0].split(" ")[0] in ("Piano", "Violin")
    assert edited("Music of the night .", NEAR, ("drop", "swap", "negate"), random.Random(0)) == []


def test_nearest_words_come_nearest_first_without_the_word_or_a_phrase() -> None:
    vocab = ["cat", "kitten", "dog", "new york", "car", "3rd"]
    vectors = np.array(
        [[1, 0, 0], [0.9, 0.1, 0], [0.6, 0.8, 0], [1, 0.01, 0], [0.1, 0.9, 0.3], [1, 0, 0.001]], np.float32
    )
    model = staticsem.StaticModel(vocab, vectors, phrases="add")
    near = nearest_words(model, ["cat", "car", "ghost"], 2)
    assert near == {"cat": ["kitten", "dog"], "car": ["dog", "kitten"]}
    assert nearest_words(model, ["cat"], 2, among=2) == {"cat": ["kitten"]}
    cased = staticsem.StaticModel(["man", "Man", "woman"], np.array([[1, 0], [1, 0], [0.5, 0.5]], np.float32))
    assert nearest_words(cased, ["man", "Man"], 1) == {"man": ["woman"], "Man": ["woman"]}  # not its case
    assert nearest_words(cased, ["man"], 1, among=2) == {}  # no other word there


def test_families_list_each_edited_sentence_and_how_many_copies_follow() -> None:
    model = staticsem.StaticModel(
        ["man", "woman", "dog", "cat"], np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32)
    )
    seeds = ["The man is here .", "Nothing to edit .", "A dog ran ."]
    copies, families = edit_families(seeds, model, EditSettings(sentences=3, neighbours=1), seed=0)
    assert [index for index, _ in families] == [0, 2]
    first, second = families
    kinds = ("drop", "swap", "negate")
    assert copies[: first[1]] == edited(seeds[0], {"man": ["woman"]}, kinds, random.Random(0))
    assert "A cat ran ." in copies[first[1] : first[1] + second[1]] and len(copies) == first[1] + second[1]


class Rows(Objective):
    """Examples 0..size-1, some of them in families."""

    name = "rows"

    def __init__(self, size: int, families: list[np.ndarray]) -> None:
        self.size, self._families = size, families

    def usable(self) -> np.ndarray:
        return np.arange(self.size)

    def families(self) -> list[np.ndarray]:
        return self._families


def test_family_batches_hold_whole_families_for_their_share_and_random_rows_for_the_rest() -> None:
    families = [np.array([i, 1000 + 3 * i, 1001 + 3 * i, 1002 + 3 * i]) for i in range(200)]
    settings = KDSettings(batch_size=64, dev_size=100, family_share=0.25)
    split = _Split(Rows(2000, families), settings, np.random.default_rng(0))
    train = set(split.train.tolist())
    cut = [[r for r in f.tolist() if r in train] for f in families]  # the dev split's rows left out
    whole = [set(f) for f in cut if len(f) > 1]
    for _ in range(50):
        batch = split.next_batch()
        assert len(batch) == len(set(batch.tolist())) and set(batch.tolist()) <= train
        inside = [f for f in whole if f <= set(batch.tolist())]
        assert sum(map(len, inside)) >= 16  # a quarter of the batch: whole families
        assert len(batch) >= 64 - 3
    plain = _Split(Rows(2000, families), KDSettings(batch_size=64, dev_size=100), np.random.default_rng(0))
    assert plain.family_rows == 0


def test_families_that_overshoot_their_share_never_make_a_batch_larger_than_asked() -> None:
    """A share the last family overshoots, beside neighbour groups filling the rest: the rest shrinks."""
    families = [np.array([i, 1000 + 3 * i, 1001 + 3 * i, 1002 + 3 * i]) for i in range(200)]

    class Near(Rows):
        def directions(self) -> np.ndarray:
            return np.random.default_rng(1).normal(size=(self.size, 4)).astype(np.float32)

    for share, groups in ((0.75, 0.25), (0.5, 0.5), (0.99, 0.0)):
        settings = KDSettings(
            batch_size=64, dev_size=100, family_share=share, group_share=groups, group_size=4, group_pool=256
        )
        split = _Split(Near(2000, families), settings, np.random.default_rng(0))
        sizes = [len(split.next_batch()) for _ in range(200)]
        assert max(sizes) <= 64 + 3 and min(sizes) >= 40, (share, groups, min(sizes), max(sizes))
        if groups:  # asked for fewer rows than its groups hold: its seeds only, no rows given back
            at = split.at
            assert len(split.grouped_batch(2)) <= split.groups * 4 and split.at in (
                at + split.groups,
                split.groups,
            )


def run(folder: Path, teacher: FakeTeacher, **changes: object) -> staticsem.StaticModel:
    settings = tiny_swe(folder / "corpus.txt", fallback="prefix", kd_short=120, **changes)
    Pipeline(settings, folder / "model", teacher=teacher, show_progress=False, save_every=0.0).run("float32")  # type: ignore[arg-type]
    return staticsem.load(folder / "model")


def test_the_step_edits_the_first_short_sentences_and_distillation_reads_their_targets(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    off = EditSettings(sentences=0)
    plain = run(tmp_path, FakeTeacher(subword_tokenizer), edit=off)
    keys = json.loads((tmp_path / ".model.work" / "kd.json").read_text())["key"]
    teacher = FakeTeacher(subword_tokenizer)
    extra = tmp_path / "extra.txt"  # KD-only text: listed before the short sentences, never edited
    extra.write_text("".join(f"The judge of the court read law number {i} aloud .\n" for i in range(40)))
    edit = EditSettings(sentences=50, kinds="drop,swap")
    model = run(tmp_path, teacher, edit=edit, kd_corpus=(str(extra),))
    work = tmp_path / ".model.work"
    record = json.loads((work / "edits.json").read_text())
    targets = json.loads((work / "targets.json").read_text())["sentences"]
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    assert teacher.sentences == 160 + len(record["sentences"]) and 0 < record["edited"] <= 50
    assert len(targets) == 160 and targets[:40] == extra.read_text().splitlines()
    edits = model.metadata["steps"]["edits"]["teacher_passes"]
    assert model.metadata["teacher_passes"] == plain.metadata["teacher_passes"] + 40 + edits
    assert "families" not in model.metadata["steps"]["edits"]
    records = {"edits": record, "targets": {"sentences": targets}}
    facts = SimpleNamespace(records=records, work=SimpleNamespace(folder=work))
    start = np.zeros((len(chosen) + len(targets), 16))
    sentences, embeddings, families = with_edits(facts, [*chosen, *targets], start)
    assert len(sentences) == len(embeddings) and len(families) == record["edited"]
    for family in families:
        original, copies = sentences[family[0]], [sentences[i] for i in family[1:]]
        assert family[0] >= len(chosen) and original in targets[-120:][:50]  # the first short ones
        for copy in copies:  # each copy is its sentence with one word left out or changed
            a, b = original.split(" "), copy.split(" ")
            assert len(b) == len(a) - 1 or sum(x != y for x, y in zip(a, b, strict=True)) == 1
    assert json.loads((work / "kd.json").read_text())["key"] != keys
    assert not np.allclose(model.vectors, plain.vectors)
    again = run(tmp_path, FakeTeacher(subword_tokenizer), edit=off)  # the plain model, bit for bit
    assert json.loads((work / "kd.json").read_text())["key"] == keys
    assert np.array_equal(again.vectors, plain.vectors)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"edit": EditSettings(sentences=-1)}, "--edit-sentences must be 0 or more"),
        ({"edit": EditSettings(sentences=5, kinds="drop,shuffle")}, "--edit-kinds takes"),
        ({"edit": EditSettings(sentences=5, kinds=",")}, "--edit-kinds takes"),
        ({"edit": EditSettings(sentences=5, neighbours=0)}, "--edit-neighbours must be at least 1"),
        ({"edit": EditSettings(sentences=5, share=1.0)}, "--edit-share must be above 0"),
        ({"edit": EditSettings(sentences=5, share=0.0)}, "--edit-share must be above 0"),
        ({"edit": EditSettings(sentences=5), "kd_short": 0}, "needs --kd-short above 0"),
        ({"edit": EditSettings(sentences=5), "kd": KDSettings(group_share=0.8)}, "fill more than a batch"),
    ],
)
def test_bad_edit_settings_get_one_line_before_any_teacher_pass(
    tmp_path: Path, changes: dict, message: str
) -> None:
    write_corpus(tmp_path / "corpus.txt")
    with pytest.raises(InputError, match=message):
        tiny_swe(tmp_path / "corpus.txt", **changes).validate()


def test_edits_refuse_a_build_of_several_languages(tmp_path: Path) -> None:
    for name in ("en", "de"):
        write_corpus(tmp_path / f"{name}.txt")
    corpus = (f"en={tmp_path / 'en.txt'}", f"de={tmp_path / 'de.txt'}")
    with pytest.raises(InputError, match="one language"):
        replace(tiny_swe(tmp_path / "en.txt"), corpus=corpus, edit=EditSettings(sentences=5)).validate()


def test_by_default_a_one_language_build_with_short_sentences_edits_30000(tmp_path: Path) -> None:
    write_corpus(tmp_path / "corpus.txt")
    corpus, default = tmp_path / "corpus.txt", EditSettings()
    assert tiny_swe(corpus, edit=default).edits() == 30_000 == default.count(True, 0)
    assert tiny_swe(corpus, edit=default, kd_short=0).edits() == 0
    assert tiny_swe(corpus, edit=EditSettings(sentences=7)).edits() == 7
    tagged = replace(tiny_swe(corpus, edit=default), corpus=(f"en={corpus}", f"de={corpus}"))
    assert tagged.edits() == 0
    tagged.validate()  # the default asks nothing of a build of several languages
    tiny_swe(corpus, edit=default, kd_short=0).validate()
