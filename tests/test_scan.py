"""The corpus's passes on every core (``corpus.scan``, ``corpus.stored``, ``workers``): bit for bit the
one-process reading, counting, choice and short-sentence draw, whatever the number of workers."""

from __future__ import annotations

import gzip
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem import load
from staticsem.distillation.corpus import scan as scan_module
from staticsem.distillation.corpus import stored as stored_module
from staticsem.distillation.corpus.exclude import sentence_hash
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
from staticsem.distillation.corpus.sampling import (
    count_words,
    sample_sentences,
    select_sentences,
    select_stored,
    sentence_words,
)
from staticsem.distillation.corpus.scan import Words, stream_sentences
from staticsem.distillation.corpus.stored import StoredCorpus
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.workers import Message, Pool, check_workers
from staticsem.errors import InputError, StaticsemError

WORKERS = (1, 2, 3)


@pytest.fixture(autouse=True)
def every_corpus_on_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small corpora are read in one process by default (starting workers costs more): not here."""
    monkeypatch.setattr(scan_module, "SMALL", 0)


@pytest.fixture()
def corpus(tmp_path: Path) -> list[str]:
    """Three sources (plain, gzip, JSON lines) with duplicates across them, sentences of every length, lines
    of several sentences, one line that is not UTF-8, and an exclusion list hitting lines and sentences."""
    plain = write_corpus(tmp_path / "a.txt", count=700, seed=1)
    lines = plain.read_text(encoding="utf-8").splitlines()
    lines[10] = "Too short."
    lines[11] = lines[12] + " " + lines[13] + " The secret one is here today."  # three sentences
    lines[20] = "The whole listed line of words zebra yak."
    lines[22] = "The yak and the zebra sing."  # kept: yak seen first here, zebra first in the dropped line
    lines += lines[100:130]  # duplicates inside the file
    raw = "\n".join(lines).encode() + b"\n\xff\xfe broken bytes here\n" + b"Cat dog fur and the pet.\n"
    plain.write_bytes(raw)
    zipped = tmp_path / "b.txt.gz"
    more = write_corpus(tmp_path / "b.txt", count=500, seed=2).read_text(encoding="utf-8").splitlines()
    with gzip.open(zipped, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(more + lines[200:260]) + "\n")  # duplicates of the first file
    records = write_corpus(tmp_path / "c.txt", count=300, seed=3).read_text(encoding="utf-8").splitlines()
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": r}) + "\n" for r in records))
    listed = tmp_path / "eval.sha1"
    listed.write_text(
        "\n".join(
            sentence_hash(s)
            for s in ("The whole listed line of words zebra yak.", "The secret one is here today.")
        )
        + "\n"
        + sentence_hash(more[7])
        + "\n"
    )
    return [str(plain), str(zipped), str(tmp_path / "c.jsonl"), str(listed)]


def options(corpus: list[str], **changes: object) -> CorpusOptions:
    return CorpusOptions(exclude=(corpus[3],), **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("limit", [None, 900])
def test_the_sentences_are_the_one_process_readings_whatever_the_workers(
    corpus: list[str], workers: int, limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan_module, "LINES", 50)  # many messages, so each worker gets several
    sources, settings = corpus[:3], options(corpus, max_sentences=limit)
    want_excluded: dict[str, int] = {}
    want = list(iter_sentences(sources, settings, want_excluded))
    got_excluded: dict[str, int] = {}
    got = list(stream_sentences(sources, settings, workers=workers, excluded=got_excluded))
    assert got == want and got_excluded == want_excluded
    assert len(want) == (limit or 1496) and sum(want_excluded.values()) == 3  # two lines and a sentence


@pytest.mark.parametrize("workers", WORKERS)
def test_counts_choice_and_short_draw_from_the_stored_corpus_are_the_one_process_ones(
    corpus: list[str], workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan_module, "LINES", 50)
    sources, settings = corpus[:3], options(corpus)
    counts, total = count_words(iter_sentences(sources, settings), lowercase=True, show_progress=False)
    stored = StoredCorpus.build(
        tmp_path / "stored", sources, settings, Words(lowercase=True), workers=workers, show_progress=False
    )
    assert list(stored.counter().items()) == list(counts.items())  # the first-seen order too (ties)
    assert stored.sentences == total
    reopened = StoredCorpus.open(tmp_path / "stored")
    assert reopened is not None and reopened.words == stored.words and reopened.excluded == stored.excluded
    np.testing.assert_array_equal(reopened.counts, stored.counts)
    vocab = [w for w, _ in counts.most_common(25)]
    targets = [6] * 10 + [3] * 15
    want = select_sentences(iter_sentences(sources, settings), vocab, counts, targets, True, 1.0, False)
    got = select_stored(stored, vocab, counts, targets, 1.0, False)
    assert got.sentences == want.sentences and got.stats == want.stats
    np.testing.assert_array_equal(got.fill, want.fill)
    short = [s for s in iter_sentences(sources, CorpusOptions(5, 15, exclude=settings.exclude))]
    sizes = stored.lengths()
    candidates = list(stored.texts(np.flatnonzero((sizes >= 5) & (sizes <= 15))))
    assert candidates == short
    assert sample_sentences(candidates, 40, set(want.sentences), 3) == sample_sentences(
        iter(short), 40, set(want.sentences), 3
    )


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_the_stored_corpus_gives_every_sentence_its_vocabulary_rows_across_chunk_edges(
    corpus: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """``rows`` turns ``ID_ROWS`` sentences at a time into vocabulary rows (65,536 in a build): made small,
    a corpus of ~1,500 sentences crosses many chunk edges and ends in a partial chunk. Every sentence's rows
    (its vocabulary words, in order, repeats kept; none for a sentence without one) are its own words', and
    the sentences chosen by them are read back whole."""
    monkeypatch.setattr(stored_module, "ID_ROWS", chunk)
    monkeypatch.setattr(scan_module, "LINES", 37)  # the scan's messages have edges of their own
    sources, settings = corpus[:3], options(corpus)
    stored = StoredCorpus.build(
        tmp_path / "stored", sources, settings, Words(lowercase=True), workers=1, show_progress=False
    )
    sentences = list(iter_sentences(sources, settings))
    assert stored.sentences == len(sentences) and (chunk == 1 or len(sentences) % chunk)
    counts, _ = count_words(sentences, lowercase=True, show_progress=False)
    # words of middling frequency, then some rarer ones and a word the corpus lacks: rows in another order
    # than the stored table's first-seen one, and sentences with no vocabulary word at all
    vocab = [w for w, _ in counts.most_common(30)][:10:-1] + [w for w, c in counts.items() if c == 2][:5]
    vocab.append("nowhere")
    index = {word: row for row, word in enumerate(vocab)}
    want = [[index[w] for w in sentence_words(s, True) if w in index] for s in sentences]
    got = list(stored.rows(vocab))
    assert len(got) == len(want) and got == want
    assert [] in want and any(len(row) > 3 for row in want)
    choice = select_stored(stored, vocab, counts, [4] * len(vocab), 1.0, False)
    assert (
        choice.sentences
        == select_sentences(sentences, vocab, counts, [4] * len(vocab), True, 1.0, False).sentences
    )


def test_a_worker_that_counts_a_message_short_is_seen(
    corpus: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the equality above rests on: each message's words reach the counts (a message's counts dropped
    here, in this process's merge, must change them)."""
    monkeypatch.setattr(scan_module, "LINES", 50)
    sources, settings = corpus[:3], options(corpus)
    counts, _ = count_words(iter_sentences(sources, settings), lowercase=True, show_progress=False)
    real = scan_module._chunk
    calls = []

    def dropping(result: Message, kept: np.ndarray, table: dict[str, int] | None) -> scan_module.Kept:
        chunk = real(result, kept, table)
        calls.append(1)
        if len(calls) == 2 and chunk.ids is not None:
            chunk.ids = chunk.ids[: len(chunk.ids) // 2]
        return chunk

    monkeypatch.setattr(scan_module, "_chunk", dropping)
    stored = StoredCorpus.build(
        tmp_path / "s", sources, settings, Words(True), workers=2, show_progress=False
    )
    assert list(stored.counter().items()) != list(counts.items())


def test_the_language_split_of_an_untagged_corpus_is_the_one_process_one(tmp_path: Path) -> None:
    english = write_corpus(tmp_path / "en.txt", count=200).read_text(encoding="utf-8").splitlines()
    german = [
        "Der Hund und die Katze schlafen heute im Garten.",
        "Wir haben gestern ein neues Buch gekauft und gelesen.",
    ] * 30
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("\n".join(e for pair in zip(english, german, strict=False) for e in pair) + "\n")
    for language in ("en", "de"):
        settings = CorpusOptions(language=language, languages=("en", "de"))
        want = list(iter_sentences([str(mixed)], settings))
        assert list(stream_sentences([str(mixed)], settings, workers=2)) == want and want


def test_a_bad_line_is_the_same_one_line_error_from_a_worker(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "A fine first line of words."}\n{"txt": "no text field"}\n')
    for workers in (1, 2):
        with pytest.raises(InputError, match="bad.jsonl:2: no string field 'text'"):
            list(stream_sentences([str(bad)], workers=workers))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe not text\n" * 150)
    with pytest.raises(InputError, match="binary.txt: mostly not UTF-8 text .lines 1-100."):
        list(stream_sentences([str(binary)], workers=2))


def test_non_utf8_lines_are_skipped_with_the_one_process_warning(
    corpus: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        list(stream_sentences(corpus[:1], workers=2))
    assert "a.txt: skipped 1 lines that are not UTF-8 (the first: line 731)" in caplog.text


# ---------------------------------------------------------------------------------------------- the pool
def test_the_pool_returns_results_in_order_and_raises_a_jobs_error_as_one_line() -> None:
    messages = [Message({"n": n}, {"x": np.arange(n)}) for n in range(40)]
    with Pool("pool_jobs:slow_sum", {"scale": 2}, setup="pool_jobs:sum_setup", workers=3) as pool:
        assert pool.workers == 3
        assert [m.meta["sum"] for m in pool.map(messages)] == [2 * n * (n - 1) // 2 for n in range(40)]
    with Pool("pool_jobs:slow_sum", {"scale": 2}, setup="pool_jobs:sum_setup", workers=1) as here:
        assert here.workers == 1 and next(iter(here.map(messages[3:4]))).meta["sum"] == 6
    failing = [Message({"n": 1}), Message({"n": -1}), Message({"n": 2})]
    with (
        Pool("pool_jobs:slow_sum", {"scale": 1}, setup="pool_jobs:sum_setup", workers=2) as pool,
        pytest.raises(InputError, match="^a negative count: -1$"),
    ):
        list(pool.map(failing))
    with (
        Pool("pool_jobs:slow_sum", {"scale": 1}, setup="pool_jobs:sum_setup", workers=2) as pool,
        pytest.raises(StaticsemError, match=r"worker process 2 of 2 \(pid \d+\) stopped .*\(exit code 3\)"),
    ):
        list(pool.map([Message({"n": 1}), Message({"n": 0, "exit": 3})]))
    with pytest.raises(InputError, match="--workers must be at least 1, got 0"):
        check_workers(0)
    assert check_workers(None) >= 1


@pytest.mark.timeout(60)  # a lost answer waited for forever is a failure too
@pytest.mark.parametrize("at", [0, 10, 29])
def test_a_worker_that_exits_cleanly_mid_stream_is_an_error_naming_it_never_a_short_result(at: int) -> None:
    """A child that ends with exit code 0 before answering (a library calling ``sys.exit(0)``, an
    ``os._exit``) has lost its messages: the stream fails, naming which process, wherever the exit falls."""
    messages = [Message({"n": n, **({"exit": 0} if n == at else {})}) for n in range(30)]
    got: list[int] = []
    with Pool("pool_jobs:slow_sum", {"scale": 1}, setup="pool_jobs:sum_setup", workers=3) as pool:
        pids = [child.process.pid for child in pool.children]
        with pytest.raises(StaticsemError) as raised:
            got.extend(m.meta["sum"] for m in pool.map(messages))
    dead = at % 3  # message i goes to process i % 3
    assert str(raised.value).startswith(
        f"worker process {dead + 1} of 3 (pid {pids[dead]}) stopped before it answered (exit code 0)"
    )
    assert got == [n * (n - 1) // 2 for n in range(at)]  # the answers before it, then the error
    assert len(str(raised.value).splitlines()) == 1


def test_a_busy_worker_does_not_hold_up_the_others() -> None:
    """A message bigger than a pipe holds waits for its busy child in a thread of its own: the parent feeds
    the other child meanwhile (one writing parent fed one child at a time, a GPU's preparers 1.8x one)."""
    from staticsem.distillation import workers

    payload = b"x" * (4 * workers.PIPE_BYTES)
    messages = [Message({"sleep": 1.5 if n == 0 else 0}, blobs={"p": payload}) for n in range(6)]
    with Pool("pool_jobs:stamp", workers=2) as pool:
        started = time.monotonic()
        got = [m.meta for m in pool.map(messages)]
        if sys.platform == "linux":  # pipes widened: a batch crosses in a few reads (F_GETPIPE_SZ)
            import fcntl

            assert fcntl.fcntl(pool.children[0].stdout.fileno(), fcntl.F_GETPIPE_SZ) == workers.PIPE_BYTES
    assert got[0]["at"] - started >= 1.5 and got[0]["pid"] != got[3]["pid"]
    assert got[3]["at"] < got[0]["at"] - 0.5, "the other child waited for the busy one"


# ---------------------------------------------------------------------------------------------- a build
def test_a_build_on_several_workers_is_the_one_process_build(
    tmp_path: Path, subword_tokenizer: object
) -> None:
    """Vocabulary, choice, short sentences and the model: equal for 1 and 3 workers, and equal to a build
    whose work folder has no stored corpus (the corpus read again for each step, as before)."""
    corpus = write_corpus(tmp_path / "corpus.txt", count=900)
    settings = tiny_swe(corpus, kd_short=60, stages=("extract", "pca", "kd"))
    built = {}
    for name, workers in (("one", 1), ("three", 3)):
        run = Pipeline(
            settings,
            tmp_path / name,
            teacher=FakeTeacher(subword_tokenizer),
            show_progress=False,
            workers=workers,  # type: ignore[arg-type]
        )
        run.run(dtype="float32")
        built[name] = run
    one, three = built["one"], built["three"]
    for step in ("vocab", "select", "targets"):
        assert {k: v for k, v in one.records[step].items() if k != "seconds"} == {
            k: v for k, v in three.records[step].items() if k != "seconds"
        }, step
    np.testing.assert_array_equal(load(tmp_path / "one").vectors, load(tmp_path / "three").vectors)
    # the same steps on the corpus read again: the stored corpus gone before the choice
    again = Pipeline(
        settings, tmp_path / "again", teacher=FakeTeacher(subword_tokenizer), show_progress=False
    )  # type: ignore[arg-type]
    again.run_steps(("vocab",), again.keys)
    for folder in again.work.folder.glob("corpus-*"):
        import shutil

        shutil.rmtree(folder)
    assert again.stored_corpus(True) is None
    again.run_steps(("select",), again.keys)
    assert again.records["select"]["sentences"] == one.records["select"]["sentences"]
    assert Counter(again.records["vocab"]["words"]) == Counter(one.records["vocab"]["words"])


def test_the_steps_after_the_vocabulary_read_the_stored_corpus_not_the_files(
    tmp_path: Path, subword_tokenizer: object
) -> None:
    """The corpus is read once: with its file gone after the vocabulary step, the choice and the short
    sentences' draw still run, and choose what a build with the file there chooses."""
    corpus = write_corpus(tmp_path / "corpus.txt", count=600)
    settings = tiny_swe(corpus, kd_short=40, stages=("extract", "pca", "kd"), fallback="prefix")
    teacher = FakeTeacher(subword_tokenizer)  # type: ignore[arg-type]
    runs = {
        name: Pipeline(settings, tmp_path / name, teacher=teacher, show_progress=False, workers=1)  # type: ignore[arg-type]
        for name in ("there", "gone")
    }
    steps = ("vocab", "select", "targets")
    runs["there"].run_steps(steps, runs["there"].keys)
    gone = runs["gone"]
    gone.run_steps(steps[:1], gone.keys)
    corpus.rename(tmp_path / "elsewhere.txt")
    gone.run_steps(steps[1:], gone.keys)
    for step in steps[1:]:
        assert gone.records[step]["sentences"] == runs["there"].records[step]["sentences"], step
    assert gone.records["targets"]["short"] == 40
