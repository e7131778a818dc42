"""The hand-over (on by default): what a language of a multi-language build cannot use of its share of the
words or the short sentences goes to the others; its keys, its word lists and Ray."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from fakes import FakeTeacher
from test_multilingual import pipeline, reader, write_three


@pytest.fixture()
def three(tmp_path: Path) -> Path:
    return write_three(tmp_path)


def test_an_unused_share_is_handed_to_english_first_then_to_the_others() -> None:
    from staticsem.distillation.corpus.languages import hand_over

    even = dict.fromkeys(("en", "fr", "zh", "de"), 1.0)
    shares = dict.fromkeys(even, 30)
    assert hand_over(shares, {"en": 100, "fr": 20, "zh": 10, "de": 100}, even, "en") == {
        "en": 60, "fr": 20, "zh": 10, "de": 30,
    }  # fmt: skip
    assert hand_over(shares, {"en": 35, "fr": 20, "zh": 10, "de": 100}, even, "en") == {
        "en": 35, "fr": 20, "zh": 10, "de": 55,
    }  # fmt: skip
    # short sentences: by the languages' weights (chosen sentences), each capped at what it has
    quotas, room = {"es": 60, "en": 40, "de": 20}, {"es": 50, "en": 999, "de": 999}
    assert hand_over(quotas, room, {"es": 6, "en": 4, "de": 2}) == {"es": 50, "en": 47, "de": 23}
    assert sum(hand_over(shares, dict.fromkeys(even, 5), even, "en").values()) == 20  # no room: fewer
    # a language given more than its room in a round takes only its room; the rest goes round again
    three = dict.fromkeys("abc", 1.0)
    room = {"a": 10, "b": 32, "c": 100}
    assert hand_over(dict.fromkeys("abc", 30), room, three) == {"a": 10, "b": 32, "c": 48}


def test_hand_over_gives_a_languages_unused_words_and_short_sentences_to_the_others(three: Path) -> None:
    """Swedish (60 lines of 12 words) has fewer words than its third of the budget: English takes the rest;
    its short sentences run out too, and the others draw them."""
    rng = np.random.default_rng(0)
    few = ["qcat", "qdog", "qtax", "qlaw", "qthe", "qa", "qof", "qand", "qriver", "qsong", "qfish", "qbank"]
    lines = [" ".join(rng.choice(few, size=6)) + "." for _ in range(60)]
    (three / "swedish.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    teacher = FakeTeacher(reader(three))
    common: dict[str, object] = {"vocab_size": 60, "kd_short": 600, "stages": ("extract", "pca", "kd")}
    plain = pipeline(three, teacher, "plain", hand_over=False, **common)
    handed = pipeline(three, teacher, "handed", **common)  # on by default
    before = handed.keys["merge"]  # read before the shares are handed over
    plain.run(dtype="float32")
    handed.run(dtype="float32")
    assert handed.keys["merge"] != before  # the keys follow the new shares
    sizes = {lang: run.settings.vocab_size for lang, run in handed.subruns.items()}
    usable = {lang: len(run.records["vocab"]["words"]) for lang, run in handed.subruns.items()}
    assert sum(sizes.values()) == 60 and sizes["sv"] == usable["sv"] == 12 and sizes["en"] == 20 + 8
    assert sizes["de"] == 20  # English had room for all of Swedish's spare
    assert len(handed.records["merge"]["words"]) > len(plain.records["merge"]["words"])
    targets = {run: json.loads((run.work.folder / "targets.json").read_text()) for run in (plain, handed)}
    assert targets[plain]["short"] < 600 == targets[handed]["short"]  # Swedish's shortfall drawn elsewhere
    short = targets[handed]["short_languages"]
    assert short["sv"] == targets[plain]["short_languages"]["sv"]
    # the others share the 600 by the sentences stage 1 chose in each (English more than German here)
    chosen = {lang: len(run.records["select"]["sentences"]) for lang, run in handed.subruns.items()}
    assert chosen["en"] > 1.2 * chosen["de"]
    for lang in ("en", "de"):
        share = (600 - short["sv"]) * chosen[lang] / (chosen["en"] + chosen["de"])
        assert abs(short[lang] - share) <= 1, (short, chosen)


def test_on_ray_the_default_hand_over_is_skipped_with_one_warning(
    three: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The hand-over counts the corpora here: a Ray build keeps the shares (on by default, so no error)."""
    from staticsem.distillation.methods.swe.languages import hand_over_words

    run = pipeline(three, FakeTeacher(reader(three)))
    run.scale = object()  # what a RayScale is to this step: not None
    sizes = {lang: sub.settings.vocab_size for lang, sub in run.subruns.items()}
    with caplog.at_level(logging.WARNING):
        hand_over_words(run)
    assert {lang: sub.settings.vocab_size for lang, sub in run.subruns.items()} == sizes
    assert [r.getMessage() for r in caplog.records if "hand-over" in r.getMessage()] == [
        "--ray: no hand-over of words (it counts the corpora here); each language keeps its share"
    ]


def test_a_languages_usable_words_are_those_seen_min_count_times_of_its_list(three: Path) -> None:
    """What a language can keep, as its vocabulary step keeps it: words seen exactly --min-count (2) times
    count, once do not; with --vocabulary, only the listed ones."""
    from staticsem.distillation.methods.swe.languages import hand_over_words, usable_words

    lines = [f"qa qb qc qd qe {'qf' if i < 2 else 'qa'} {'qg' if i < 2 else 'qb'} {'qh' if i < 1 else 'qc'}."
             for i in range(40)]  # fmt: skip
    (three / "swedish.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    teacher = FakeTeacher(reader(three))
    run = pipeline(three, teacher)
    run.subruns["sv"]._teacher = teacher
    assert usable_words(run.subruns["sv"]) == 7  # qa-qe, and qf, qg seen twice; not qh
    hand_over_words(run)
    assert run.subruns["sv"].settings.vocab_size == 7
    (three / "list.txt").write_text("qa\nqf\nqh\nqzz\n", encoding="utf-8")
    listed = pipeline(three, teacher, "listed", vocabulary=str(three / "list.txt"))
    listed.subruns["sv"]._teacher = teacher
    assert usable_words(listed.subruns["sv"]) == 2  # qa and qf: qh is seen once, qzz never


def test_the_hand_over_is_in_the_keys_of_several_languages_and_not_of_one(three: Path) -> None:
    teacher = FakeTeacher(reader(three))
    on, off = pipeline(three, teacher, "on"), pipeline(three, teacher, "off", hand_over=False)
    assert all(on.keys[step] != off.keys[step] for step in ("targets", "kd", "align"))
    english = (str(three / "english.txt"),)
    alone = [pipeline(three, teacher, f"en{flag}", corpus=english, hand_over=flag) for flag in (True, False)]
    assert alone[0].keys == alone[1].keys and "targets" in alone[0].keys
