"""Corpus reading, bad corpora, vocabulary and sentence choice, the embedded dictionary corpus parsers."""

from __future__ import annotations

import gzip
import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from staticsem.distillation.corpus import embedded
from staticsem.distillation.corpus.reading import CorpusOptions, check_sources, iter_sentences
from staticsem.distillation.corpus.sampling import (
    build_vocabulary,
    count_words,
    select_sentences,
    word_targets,
)
from staticsem.errors import InputError


def test_reads_txt_gz_jsonl_and_splits_sentences(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(
        "The cat sat on the mat. The dog ran away fast!\nToo short.\n", encoding="utf-8"
    )
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("The cat sat on the mat. A bird sang in the tree.\n")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"text": "Rivers flow to the sea."}) + "\n", encoding="utf-8"
    )
    sources = [str(tmp_path / n) for n in ("a.txt", "b.txt.gz", "c.jsonl")]
    got = list(iter_sentences(sources, CorpusOptions(min_words=4)))
    assert got == [
        "The cat sat on the mat.",
        "The dog ran away fast!",
        "A bird sang in the tree.",
        "Rivers flow to the sea.",
    ]  # de-duplicated, short sentence dropped
    assert list(iter_sentences(sources, CorpusOptions(min_words=4, max_sentences=2))) == got[:2]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.txt", None, "corpus file is missing"),
        ("binary.bin", b"\x00\x01\x02garbage" * 100, "binary data"),
        ("latin.txt", b"caf\xe9 \xff\xfe\n" * 200, "mostly not UTF-8"),
        ("bad.jsonl", b'{"text": "fine line here"}\nnot json\n', "bad.jsonl:2: not a JSON line"),
        ("field.jsonl", b'{"body": "x"}\n', "no string field 'text'"),
        ("bad.gz", b"not gzip at all", "cannot read"),
    ],
)
def test_bad_corpora_give_clear_errors(
    tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        check_sources([str(path)])
        list(iter_sentences([str(path)]))


def test_a_few_non_utf8_lines_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = [f"The cat number {i} sat on the mat." for i in range(20)]
    lines = [line.encode() for line in good]
    for at, junk in (
        (3, b"caf\xe9 au lait is hot."),
        (10, b"\xff\xfe broken bytes here."),
        (15, b"na\xefve words are here."),
    ):
        lines.insert(at, junk)
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    check_sources([str(path)])
    with caplog.at_level(logging.WARNING, logger="staticsem"):
        assert list(iter_sentences([str(path)])) == good
    assert f"{path}: skipped 3 lines that are not UTF-8 (the first: line 4)" in caplog.text


def test_empty_corpus_and_no_sources(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match="no usable sentence"):
        count_words(iter_sentences([str(tmp_path / "empty.txt")]), lowercase=True, show_progress=False)
    with pytest.raises(InputError, match="no corpus given"):
        check_sources([])


def test_gigantic_line_is_read_in_pieces(tmp_path: Path) -> None:
    sentence = "The cat sat on the mat today. "
    (tmp_path / "huge.txt").write_text(sentence * 150_000, encoding="utf-8")  # one 4.5 MB line
    got = list(iter_sentences([str(tmp_path / "huge.txt")]))
    assert got == ["The cat sat on the mat today."]


def test_vocabulary_from_counts_and_from_a_word_list() -> None:
    counts = Counter({"the": 10, "cat": 5, "dog": 2, "rare": 1})
    assert build_vocabulary(counts, size=10, min_count=2) == ["the", "cat", "dog"]
    assert build_vocabulary(counts, size=2, min_count=1) == ["the", "cat"]
    assert build_vocabulary(counts, 10, 2, words=["dog", "absent", "cat"]) == ["dog", "cat"]
    with pytest.raises(InputError, match="no vocabulary word occurs at least 3 times"):
        build_vocabulary(counts, 10, 3, words=["absent", "dog"])


def test_selection_shares_passes_and_takes_every_rare_occurrence() -> None:
    sentences = [f"the cat and the dog number {i}" for i in range(200)] + [
        "a rare zebra",
        "another rare zebra",
    ]
    counts, _ = count_words(sentences, lowercase=True, show_progress=False)
    vocab = ["the", "cat", "dog", "zebra", "rare"]
    chosen = select_sentences(sentences, vocab, counts, per_word=5, lowercase=True, show_progress=False)
    assert "a rare zebra" in chosen.sentences and "another rare zebra" in chosen.sentences
    assert chosen.fill[vocab.index("cat")] >= 5 and chosen.fill[vocab.index("zebra")] == 2
    assert chosen.stats["sentences_chosen"] < chosen.stats["reference_passes"]
    assert len(chosen.sentences) <= 10


def test_rare_words_get_fewer_occurrences_and_fewer_passes() -> None:
    # each rare word stands in sentences of its own: a pass per occurrence, whatever it shares
    rare = [f"w{i}" for i in range(20)]
    sentences = [f"the cat {w} number {n}" for w in rare for n in range(12)]
    sentences += [f"the cat sat on mat {i}" for i in range(100)]
    counts, _ = count_words(sentences, lowercase=True, show_progress=False)
    vocab = ["the", "cat", "sat", "on", "mat", *rare]
    assert word_targets(len(vocab), 10) == [10] * 25 and word_targets(25, 10, 30, 3) == [10] * 25
    targets = word_targets(len(vocab), 10, rare_after=5, per_rare_word=3)
    assert targets == [10] * 5 + [3] * 20
    full = select_sentences(sentences, vocab, counts, per_word=10, lowercase=True, show_progress=False)
    tapered = select_sentences(sentences, vocab, counts, targets, lowercase=True, show_progress=False)
    assert set(full.fill[5:]) == {10} and set(tapered.fill[5:]) == {3}  # every rare word, 3 times
    assert full.fill[:2].min() >= 10 and tapered.fill[:2].min() >= 10  # the frequent words fill up anyway
    assert tapered.stats["reference_passes"] == 5 * 10 + 20 * 3 and tapered.stats["words_full"] == 25
    assert len(tapered.sentences) == 20 * 3 + 10 < len(full.sentences) == 20 * 10 + 10  # + sat, on, mat
    with pytest.raises(ValueError, match="3 targets for 25 words"):
        select_sentences(sentences, vocab, counts, [1, 2, 3], lowercase=True, show_progress=False)


def test_embedded_parsers_on_small_files(tmp_path: Path) -> None:
    (tmp_path / "data.noun").write_text(
        "  1 This software and database is provided as is\n"
        '00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which exists; "the entity was large"\n',
        encoding="utf-8",
    )
    for name in ("data.verb", "data.adj", "data.adv"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert list(embedded.wordnet_texts(tmp_path)) == ["That which exists.", "The entity was large."]
    with gzip.open(tmp_path / "gcide.dict.dz", "wt", encoding="utf-8") as handle:
        handle.write(
            "Cat \\Cat\\ n.\n   1. A small domesticated {carnivore}, kept as a pet.\n"
            "      [1913 Webster]\n\n   Syn: feline\n"
        )
    assert list(embedded.gcide_texts(tmp_path / "gcide.dict.dz")) == [
        "A small domesticated carnivore, kept as a pet."
    ]


def test_embedded_corpus_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedded, "WORDNET", tmp_path / "none")
    with pytest.raises(InputError, match="apt-get install wordnet-base dict-gcide"):
        list(iter_sentences(["embedded"]))


def test_background_reader_gives_the_same_stream_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from staticsem.distillation.corpus import prefetch
    from staticsem.distillation.corpus.prefetch import background_sentences

    children: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen
    monkeypatch.setattr(
        prefetch.subprocess, "Popen", lambda *a, **k: children.append(real(*a, **k)) or children[-1]
    )

    lines = [f"Sentence number {i} is about cats." for i in range(50)] + ["Sentence number 7 is about cats."]
    with gzip.open(tmp_path / "a.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\nToo short.\n")
    (tmp_path / "b.jsonl").write_text('{"text": "A second file. It has two sentences here."}\n')
    sources = [str(tmp_path / "a.txt.gz"), str(tmp_path / "b.jsonl")]
    options = CorpusOptions(min_words=3, max_words=64)
    expected = list(iter_sentences(sources, options))
    assert list(background_sentences(sources, options, chunk=7)) == expected  # many hand-overs, deduped
    assert len(expected) == 52
    early = background_sentences(sources, options, chunk=2)
    assert [next(early) for _ in range(3)] == expected[:3]
    early.close()  # stopping early ends the reader
    assert len(children) == 2 and children[0].poll() == 0 and children[1].poll() is not None
    (tmp_path / "bad.jsonl").write_text('{"text": "fine line here"}\nnot json\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: not a JSON line"):
        list(background_sentences([str(tmp_path / "bad.jsonl")], options))
