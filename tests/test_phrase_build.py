"""Phrases in a build (``--phrases N``, ``--phrases-from FILE``): chosen on the stored corpus as Mikolov et
al. score them, covered by the chosen sentences, extracted from exactly their words' tokens, trained with
the words, and refused in one line when asked for wrongly."""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import FakeTeacher, corpus_tokenizer, tiny_swe
from staticsem.cli import app
from staticsem.distillation.corpus import stored as stored_module
from staticsem.distillation.corpus.phrase_choice import (
    PhraseSettings,
    choose,
    matched,
    read_phrase_list,
    settle,
)
from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.corpus.scan import Words
from staticsem.distillation.corpus.stored import StoredCorpus
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.stages.extract import extract
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.errors import InputError

COMMON = [
    "the",
    "a",
    "of",
    "in",
    "on",
    "is",
    "was",
    "and",
    "to",
    "with",
    "for",
    "by",
    "at",
    "from",
    "old",
    "big",
    "small",
    "man",
    "woman",
    "dog",
    "cat",
    "house",
    "river",
]
PHRASES = ["new york", "heart attack", "ice cream", "new york city", "hot dog"]
# what the code before phrases (37e6e32) gave ``tiny_swe(write_phrase_corpus(...), fallback="prefix")``
BEFORE = {
    "vocab": "99336495404e36ed",
    "select": "35586f2b26b8b3cf",
    "extract": "f7e882efb46e876c",
    "targets": "e8a5668cb269cd7b",
    "pca": "de1e368d04b1727e",
    "kd": "e81c48166d23e7bd",
}
STORED_BEFORE = "1a33858268c60eaf"


def write_phrase_corpus(path: Path, count: int = 1500, seed: int = 0) -> Path:
    """Common words in random order with one of ``PHRASES`` in each sentence; every 5th sentence has a
    comma inside its phrase ("new, york"), every 7th spells it with a hyphen."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(count):
        words = [str(w) for w in rng.choice(COMMON, size=6)]
        phrase = PHRASES[int(rng.integers(len(PHRASES)))]
        if i % 5 == 0:
            phrase = phrase.replace(" ", ", ", 1)
        elif i % 7 == 0:
            phrase = phrase.replace(" ", "-", 1)
        words.insert(int(rng.integers(len(words))), phrase)
        lines.append(" ".join(words).capitalize() + ".")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stored_corpus(tmp_path: Path, lines: list[str]) -> StoredCorpus:
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return StoredCorpus.build(
        tmp_path / "stored", [str(tmp_path / "c.txt")], CorpusOptions(1, 64), Words(True, links=True)
    )


def chosen(stored: StoredCorpus, count: int, **settings: object) -> list[str]:
    """The phrases a build would keep (``choose``, then ``settle``), as text."""
    vocab, options = stored.words, PhraseSettings(**settings)  # type: ignore[arg-type]
    chunks = lambda: stored.runs(vocab)  # noqa: E731
    found = choose(chunks, stored.counts, int(stored.counts.sum()), count, options)
    kept, _ = settle(chunks, found, [], len(vocab), count, options.min_count)
    return [" ".join(vocab[r] for r in rows) for rows in kept]


# ---------------------------------------------------------------- the choice
def test_links_are_whitespace_between_words_of_one_sentence(tmp_path: Path) -> None:
    stored = stored_corpus(tmp_path, ["New York, the big apple.", "Ice-cream  melts\there."])
    (runs,) = stored.runs(stored.words)
    assert [stored.words[r] for r in runs.rows] == [
        "new",
        "york",
        "the",
        "big",
        "apple",
        "ice",
        "cream",
        "melts",
        "here",
    ]
    assert runs.links.tolist() == [True, False, True, True, False, False, True, True, False]


def test_pairs_are_scored_against_chance_and_the_most_frequent_kept(tmp_path: Path) -> None:
    # "x y" is always together (a phrase); "the" goes with everything (common, but as chance would have it)
    lines = [f"x y the w{i % 7} the z{i % 5}" for i in range(60)] + ["the x", "y the"]
    stored = stored_corpus(tmp_path, lines)
    assert chosen(stored, 5, min_count=5, threshold=3.0, max_words=2)[0] == "x y"
    assert "the w1" not in chosen(stored, 50, min_count=5, threshold=3.0, max_words=2)
    # the floor: "x y" occurs 60 times
    assert chosen(stored, 5, min_count=61, threshold=0.0, max_words=2) == []
    # the most frequent first, at most ``count``
    everything = chosen(stored, 100, min_count=5, threshold=0.0, max_words=2)
    assert len(chosen(stored, 3, min_count=5, threshold=0.0, max_words=2)) == 3
    assert everything[:1] == ["x y"] or everything[0].startswith("the") or everything[0].endswith("the")


def test_the_score_is_mikolovs(tmp_path: Path) -> None:
    # every line distinct (the corpus drops repeated sentences): a number closes each
    texts = ["a b c"] * 30 + ["a d"] * 10 + ["e b"] * 20 + ["f g h"] * 12
    lines = [f"{text} {i}" for i, text in enumerate(texts)]
    stored = stored_corpus(tmp_path, lines)
    index = {w: i for i, w in enumerate(stored.words)}
    total = int(stored.counts.sum())
    found = choose(
        lambda: stored.runs(stored.words),
        stored.counts,
        total,
        20,
        PhraseSettings(min_count=10, threshold=0.0),
    )
    scores = {
        " ".join(stored.words[r] for r in rows): s for rows, s in zip(found.words, found.scores, strict=True)
    }
    count = {w: int(stored.counts[index[w]]) for w in "abcdefgh"}
    assert scores["a b"] == pytest.approx((30 - 10) * total / (count["a"] * count["b"]))
    assert scores["a d"] == pytest.approx((10 - 10) * total / (count["a"] * count["d"]))
    # three words: a phrase of two and a word, the better way round ("(a b) c" or "a (b c)")
    left = (30 - 10) * total / (30 * count["c"])
    right = (30 - 10) * total / (count["a"] * 30)
    assert scores["a b c"] == pytest.approx(max(left, right))
    assert "e b" in scores and "f g h" in scores and "b c" in scores
    assert "a b c" not in chosen(stored, 20, min_count=10, threshold=0.0, max_words=2)
    # a pair met only inside a longer phrase is found nowhere by encoding: not kept
    assert "g h" in scores and "g h" not in chosen(stored, 20, min_count=10, threshold=0.0)
    assert chosen(stored, 20, min_count=10, threshold=0.0)[:1] == ["a b c"]


def test_no_phrase_crosses_punctuation_or_a_sentence(tmp_path: Path) -> None:
    lines = [f"p, q r. {i}" for i in range(30)] + [f"{i} s t. u v" for i in range(15)] + ["t u 1", "t u 2"]
    stored = stored_corpus(tmp_path, lines)
    found = chosen(stored, 20, min_count=5, threshold=0.0)
    assert "q r" in found and "s t" in found and "u v" in found
    # "s t. u v" is two sentences: "t u" occurs twice only
    assert "p q" not in found and "p q r" not in found and "t u" not in found


def test_counts_take_every_chunk_of_the_stored_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored_module, "ID_ROWS", 7)  # chunks of 7 sentences: the pairs cross 8 chunk edges
    stored = stored_corpus(tmp_path, [f"m n filler{i}" for i in range(59)])
    assert sum(len(r.rows) for r in stored.runs(stored.words)) == 3 * 59
    assert chosen(stored, 1, min_count=59, threshold=0.0) == ["m n"]
    assert matched(lambda: stored.runs(stored.words), [(0, 1)], len(stored.words)).tolist() == [59]


# ---------------------------------------------------------------- the list
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", ": holds no phrase"),
        ("\n\n", ": holds no phrase"),
        ("heart attack\nlonely\n", r":2: 'lonely' has 1 words"),
        ("heart attack\nthe new york times\n", r":2: 'the new york times' has 4 words"),
        ("heart-attack\n", r":1: 'heart-attack' holds punctuation"),
        ("ice cream\nnew york,\n", r":2: 'new york,' holds punctuation"),
        ("new. york\n", r":1: 'new. york' holds punctuation"),
    ],
)
def test_a_bad_phrase_list_names_its_file_and_line(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "list.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(str(path)) + error):
        read_phrase_list(path)
    with pytest.raises(InputError, match="phrase list is missing"):
        read_phrase_list(tmp_path / "missing.txt")


def test_a_list_takes_two_word_phrases_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "list.txt"
    path.write_text("a b c\n", encoding="utf-8")
    assert read_phrase_list(path) == [["a", "b", "c"]]
    with pytest.raises(InputError, match="has 3 words"):
        read_phrase_list(path, max_words=2)


# ---------------------------------------------------------------- stage 1
def test_a_phrase_vector_is_the_mean_of_its_words_tokens_over_its_occurrences(tiny_teacher: Path) -> None:
    teacher = Teacher(str(tiny_teacher), backend="torch")
    sentences = [
        "The heart attack came at night.",
        "A heart attack, then another heart attack!",
        "Heart, attack: not a phrase here.",
        "New York City is a big city in new york state.",
        "Nothing here.",
    ]
    vocab = ["heart", "attack", "new", "york", "city", "heart attack", "new york", "new york city"]
    found = extract(
        teacher, sentences, vocab, lowercase=teacher.lowercases, batch_size=2, show_progress=False
    )
    want: dict[str, list[np.ndarray]] = {}
    for sentence in sentences:  # each sentence alone through the teacher, its phrase's tokens found by hand
        batch = teacher.forward([sentence])
        states, own, offsets = batch.states[0].numpy(), batch.own[0].numpy(), batch.offsets[0].numpy()
        for phrase in ("new york city", "heart attack", "new york"):
            pattern = r"(?<!\w)" + r"\s+".join(phrase.split()) + r"(?!\w)"
            for match in re.finditer(pattern, sentence, flags=re.IGNORECASE):
                if (
                    phrase == "new york"
                    and sentence[match.start() : match.start() + 13].lower() == "new york city"
                ):
                    continue  # "new york city" is matched there: the longest first
                tokens = own & (offsets[:, 0] >= match.start()) & (offsets[:, 0] < match.end())
                want.setdefault(phrase, []).append(states[tokens].mean(axis=0))
    assert {p: len(v) for p, v in want.items()} == {"heart attack": 3, "new york city": 1, "new york": 1}
    assert found.counts.tolist()[5:] == [3, 1, 1]
    vectors = found.vectors()
    for phrase, occurrences in want.items():
        np.testing.assert_allclose(vectors[vocab.index(phrase)], np.mean(occurrences, axis=0), atol=1e-5)


# ---------------------------------------------------------------- the build
def build(tmp_path: Path, tokenizer: Tokenizer, **changes: object) -> tuple[Pipeline, staticsem.StaticModel]:
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        write_phrase_corpus(corpus)
    settings = replace(tiny_swe(corpus, fallback="prefix"), **changes)
    pipeline = Pipeline(
        settings, tmp_path / "m", teacher=FakeTeacher(tokenizer), show_progress=False, save_every=0.0
    )
    pipeline.run(dtype="float32")
    return pipeline, staticsem.load(tmp_path / "m")


@pytest.fixture()
def phrase_tokenizer(tmp_path: Path) -> Tokenizer:
    return corpus_tokenizer(write_phrase_corpus(tmp_path / "corpus.txt"))


@pytest.mark.parametrize("mode", ["add", "replace"])
def test_a_build_gives_the_chosen_phrases_rows_covered_and_trained(
    tmp_path: Path, phrase_tokenizer: Tokenizer, mode: str
) -> None:
    phrases = PhraseSettings(min_count=5, threshold=1.0, mode=mode)
    pipeline, model = build(tmp_path, phrase_tokenizer, phrases=6, phrase=phrases)
    assert sorted(model.phrases) == sorted([*PHRASES, "york city"])  # "york city": inside "new york city"
    assert model.phrase_mode == mode
    # each phrase's count is how often encoding finds it in the corpus (what the sentence choice fills)
    record = pipeline.records["phrases"]
    lines = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()
    flat, _ = model.replace(phrases="add").row_ids(lines)
    found = np.bincount(flat, minlength=len(model))
    assert record["counts"] == [int(found[model.vocab.index(p)]) for p in record["phrases"]]
    assert pipeline.records["extract"]["phrases_seen"] == 6
    # the chosen sentences hold each phrase at least --phrase-per-phrase times
    text = "\n".join(pipeline.records["select"]["sentences"]).lower()
    for phrase in PHRASES:
        assert len(re.findall(r"(?<![\w-])" + phrase + r"(?![\w-])", text)) >= phrases.per_phrase, phrase
    stage2 = staticsem.load(tmp_path / ".m.work" / "stage2")
    assert stage2.phrases == model.phrases and stage2.phrase_mode == mode
    trained = model.vectors[[model.vocab.index(p) for p in PHRASES]]
    start = stage2.vectors[[stage2.vocab.index(p) for p in PHRASES]]
    assert not np.allclose(trained, start)  # KD trains the phrases with the words


def test_without_phrases_a_build_and_its_keys_are_as_before(
    tmp_path: Path, phrase_tokenizer: Tokenizer
) -> None:
    pipeline, model = build(tmp_path, phrase_tokenizer)
    assert pipeline.keys == BEFORE  # the keys the code before phrases gave these settings and corpus
    assert "phrases" not in pipeline.records and model.phrases == []
    (stored,) = (tmp_path / ".m.work").glob("corpus-*")
    assert stored.name == "corpus-" + STORED_BEFORE and not (stored / "links.bin").exists()
    # the phrase settings count only with phrases
    other = tiny_swe(
        tmp_path / "corpus.txt", fallback="prefix", phrase=PhraseSettings(mode="replace", min_count=2)
    )
    teacher = FakeTeacher(phrase_tokenizer)
    assert Pipeline(other, tmp_path / "m", teacher=teacher, show_progress=False).keys == BEFORE  # type: ignore[arg-type]


def test_listed_phrases_join_the_chosen_ones_and_their_words_the_vocabulary(
    tmp_path: Path, phrase_tokenizer: Tokenizer
) -> None:
    listed = tmp_path / "glossary.txt"
    listed.write_text("river house\nICE CREAM\nunseen pair\n", encoding="utf-8")
    pipeline, model = build(
        tmp_path,
        phrase_tokenizer,
        phrases=1,
        phrases_from=str(listed),
        vocab_size=10,
        phrase=PhraseSettings(min_count=5, threshold=1.0),
    )
    record = pipeline.records["phrases"]
    assert record["phrases"][0] == "new york"  # the one chosen: the most frequent
    assert "ice cream" in record["phrases"] and "unseen pair" not in record["phrases"]
    assert record["listed"] == 2  # "river house" occurs by chance (common words), "unseen pair" never
    assert {"ice", "cream"} <= set(model.vocab)  # the listed phrase's words joined the 10 words
    assert "ice cream" in model.phrases


@pytest.mark.parametrize("splitter", [None, "words"])  # the language decides, not the splitter alone
def test_a_language_without_spaces_gets_no_phrases(
    tmp_path: Path, phrase_tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture, splitter: str | None
) -> None:
    tagged = (f"ja={tmp_path / 'corpus.txt'}",)
    with caplog.at_level(logging.INFO):
        _, model = build(
            tmp_path,
            phrase_tokenizer,
            phrases=5,
            corpus=tagged,
            splitter=splitter,
            phrase=PhraseSettings(min_count=5),
        )
    assert model.phrases == []
    said = [r.getMessage() for r in caplog.records if "without spaces" in r.getMessage()]
    assert said == ["no phrases for ja: written without spaces between words"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--phrases", "-1"], "--phrases must be 0 or more, got -1"),
        (["--phrases-from", "MISSING"], "MISSING: phrase list is missing"),
        (["--phrases-from", "ONE"], "ONE:2: 'lonely' has 1 words"),
        (["--phrases-from", "FOUR"], "FOUR:1: 'the new york times' has 4 words"),
        (["--phrases-from", "EMPTY"], "EMPTY: holds no phrase"),
        (["--phrases", "5", "--phrase-mode", "both"], "--phrase-mode must be one of replace, add"),
        (["--phrases", "5", "--phrase-init", "bogus"], "--phrase-init must be one of context, zero"),
    ],
)
def test_bad_phrase_options_stop_in_one_line_before_any_pass(
    tmp_path: Path, args: list[str], error: str
) -> None:
    files = {"ONE": "ice cream\nlonely\n", "FOUR": "the new york times\n", "EMPTY": ""}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    args = [str(tmp_path / a) if a in {*files, "MISSING"} else a for a in args]
    error = (
        error.replace(error.split(":")[0], str(tmp_path / error.split(":")[0]))
        if error[0].isupper()
        else error
    )
    write_phrase_corpus(tmp_path / "corpus.txt", 50)
    given = ["distill", "swe", "--corpus", str(tmp_path / "corpus.txt"), *args, "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, given)
    assert result.exit_code == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"error: {error}") and len(lines) <= 2, (
        result.stderr
    )  # and the teacher's name
    assert not (tmp_path / "m").exists() and not (tmp_path / ".m.work").exists()


def test_zero_init_starts_distillation_from_the_words_alone(
    tmp_path: Path, phrase_tokenizer: Tokenizer
) -> None:
    from staticsem.distillation.methods.swe.phrase_step import starting_rows

    phrases = PhraseSettings(min_count=5, threshold=1.0, init="zero")
    pipeline, model = build(tmp_path, phrase_tokenizer, phrases=6, phrase=phrases)
    stage2 = staticsem.load(tmp_path / ".m.work" / "stage2")
    start = starting_rows(stage2, pipeline.settings)
    rows = [start.vocab.index(p) for p in start.phrases]
    assert not start.vectors[rows].any() and stage2.vectors[rows].any()
    words = [i for i, entry in enumerate(start.vocab) if " " not in entry]
    np.testing.assert_array_equal(start.vectors[words], stage2.vectors[words])
    texts = (tmp_path / "corpus.txt").read_text(encoding="utf-8").splitlines()[:50]
    np.testing.assert_allclose(start.encode(texts), start.without_phrases().encode(texts), atol=1e-6)
    assert sorted(model.phrases) == sorted(stage2.phrases)
    assert pipeline.keys["kd"] != build_key(tmp_path, phrase_tokenizer)  # another start, another KD


def build_key(tmp_path: Path, tokenizer: Tokenizer) -> str:
    """The distillation key of the same build with the phrases' rows started from stage 1."""
    settings = replace(
        tiny_swe(tmp_path / "corpus.txt", fallback="prefix"),
        phrases=6,
        phrase=PhraseSettings(min_count=5, threshold=1.0, init="context"),
    )
    return Pipeline(settings, tmp_path / "m", teacher=FakeTeacher(tokenizer), show_progress=False).keys["kd"]  # type: ignore[arg-type]


def test_a_triple_around_its_last_pair_is_scored_with_the_first_words_count(tmp_path: Path) -> None:
    """Only "b c" is a candidate pair ("a" and "b" stand together as chance would have it): "a b c" scores as
    a (b c), count(a) · count(b c) against chance."""
    texts = ["a b c"] * 30 + ["b c"] * 10 + ["a x"] * 200 + ["y b"] * 200 + ["z w"] * 500
    stored = stored_corpus(tmp_path, [f"{text} n{i}" for i, text in enumerate(texts)])
    index = {w: i for i, w in enumerate(stored.words)}
    total = int(stored.counts.sum())
    found = choose(lambda: stored.runs(stored.words), stored.counts, total, 50, PhraseSettings(min_count=10))
    scores = {
        " ".join(stored.words[r] for r in rows): s for rows, s in zip(found.words, found.scores, strict=True)
    }
    assert "b c" in scores and "a b" not in scores  # "a b": 30 runs of a's 230 and b's 240
    want = (30 - 10) * total / (stored.counts[index["a"]] * 40)  # count(a) · count(b c)
    assert scores["a b c"] == pytest.approx(want)


def test_the_phrases_kept_are_those_encoding_finds_most_often(tmp_path: Path) -> None:
    """ "a b" stands alone 12 times and 90 more inside "a b c": 102 runs, but encoding finds it 12 times, less
    than "d e"'s 50: with two phrases asked for, "a b c" and "d e" are kept."""
    texts = ["a b c"] * 90 + ["a b"] * 12 + ["d e"] * 50
    stored = stored_corpus(tmp_path, [f"{text} n{i}" for i, text in enumerate(texts)])
    assert chosen(stored, 2, min_count=10, threshold=0.0) == ["a b c", "d e"]


def test_a_listed_phrase_never_met_is_said_once(
    tmp_path: Path, phrase_tokenizer: Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    listed = tmp_path / "glossary.txt"
    for text, want in (
        ("ice cream\nunseen pair\n", "1 listed phrase never occurs in the corpus: it gets no row"),
        (
            "ice cream\nunseen pair\nanother absent\n",
            "2 listed phrases never occur in the corpus: they get no row",
        ),
    ):
        listed.write_text(text, encoding="utf-8")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            build(tmp_path, phrase_tokenizer, phrases=0, phrases_from=str(listed))
        assert [r.getMessage() for r in caplog.records if "never occur" in r.getMessage()] == [want]


def test_each_phrase_gets_the_occurrences_asked_for(tmp_path: Path, phrase_tokenizer: Tokenizer) -> None:
    phrases = PhraseSettings(min_count=5, threshold=1.0, per_phrase=25)
    pipeline, model = build(tmp_path, phrase_tokenizer, phrases=6, phrase=phrases, sentences_per_word=2)
    flat, _ = model.replace(phrases="add").row_ids(pipeline.records["select"]["sentences"])
    found = np.bincount(flat, minlength=len(model))
    assert min(int(found[model.vocab.index(p)]) for p in model.phrases) >= 25


def test_a_cross_lingual_build_shares_the_phrases_among_its_spaced_languages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from staticsem.distillation.methods.swe.phrase_step import phrase_shares

    settings = tiny_swe(Path("corpus.txt"), phrases=1000)
    with caplog.at_level(logging.INFO):
        shares = phrase_shares(settings, {"en": 30_000, "zh": 50_000, "de": 10_000, "ja": 10_000})
    assert shares == {"en": 750, "de": 250}
    said = [r.getMessage() for r in caplog.records if "without spaces" in r.getMessage()]
    assert said == ["no phrases for zh, ja: written without spaces between words"]


@pytest.mark.parametrize(
    "change", [{"mode": "replace"}, {"init": "context"}, {"mode": "replace", "init": "context"}]
)
def test_the_phrase_mode_and_init_keep_the_choice_and_stage_one(
    tmp_path: Path, phrase_tokenizer: Tokenizer, change: dict[str, str]
) -> None:
    write_phrase_corpus(tmp_path / "corpus.txt")
    teacher = FakeTeacher(phrase_tokenizer)

    def keys(**phrase: str) -> dict[str, str]:
        options = PhraseSettings(min_count=5, threshold=1.0, **phrase)  # type: ignore[arg-type]
        settings = replace(tiny_swe(tmp_path / "corpus.txt", fallback="prefix"), phrases=6, phrase=options)
        return Pipeline(settings, tmp_path / "m", teacher=teacher, show_progress=False).keys  # type: ignore[arg-type]

    before, after = keys(), keys(**change)
    for step in ("vocab", "phrases", "select", "extract", "targets"):
        assert before[step] == after[step], step
    assert before["kd"] != after["kd"]
