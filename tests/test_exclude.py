"""Decontamination (``--exclude``): listed sentences never reach the teacher or the training text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.cli import app
from staticsem.distillation.corpus.exclude import Exclusion, normalise, sentence_hash
from staticsem.distillation.corpus.prefetch import background_sentences
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.stages.kd import KDSettings
from staticsem.errors import InputError

MARK = "okapi"  # the one word only excluded sentences hold


class RecordingTeacher(FakeTeacher):
    """A fake teacher that keeps every text it was given."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        self.texts: list[str] = []

    def forward(self, texts: list[str], layer: int | None = None):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return super().forward(texts, layer)


def marked(count: int, offset: int = 0) -> list[str]:
    """``count`` distinct sentences of 7 words holding ``MARK`` (short enough for the short draw)."""
    return [f"The {MARK} saw {n + offset} happy dogs on mats." for n in range(count)]


def test_hashes_follow_the_shared_format() -> None:
    # the format of ../shared/data/decontam: sha1 of the normalised text, first 16 hex digits
    text = "A man, is playing_the GUITAR!! "
    assert normalise(text) == "a man is playing the guitar"
    assert sentence_hash(text) == hashlib.sha1(b"a man is playing the guitar").hexdigest()[:16]
    assert sentence_hash("a man is playing the guitar") == sentence_hash(text)


def test_both_formats_match_by_normal_form_and_bad_files_fail(tmp_path: Path) -> None:
    plain = tmp_path / "eval.txt"
    plain.write_text("A man is playing the guitar.\n\nTwo dogs run.\n", encoding="utf-8")
    hashed = tmp_path / "eval.sha1"
    hashed.write_text(sentence_hash("Stocks fell sharply.").upper() + "\n\n", encoding="utf-8")
    exclusion = Exclusion([str(plain), str(hashed)])
    assert len(exclusion) == 3
    assert "a MAN is playing -- the guitar" in exclusion and "stocks fell sharply" in exclusion
    assert "A man is playing the piano." not in exclusion and None not in exclusion
    bad = tmp_path / "bad.sha1"
    bad.write_text(sentence_hash("x") + "\nnot-a-hash\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.sha1:2: expected 16 hex digits"):
        Exclusion([str(bad)])
    with pytest.raises(InputError, match="--exclude file is missing"):
        Exclusion([str(tmp_path / "nope.txt")])


def test_the_reader_drops_listed_lines_and_sentences_and_counts_them(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "Cats sleep all day. The okapi hides well. Dogs bark at night.\n"
        "The okapi hides well.\n"  # a listed sentence again: dropped, counted once
        "A whole line. Listed as one text.\n"
        "Birds sing in the morning.\n",
        encoding="utf-8",
    )
    listed = tmp_path / "listed.txt"
    listed.write_text("the OKAPI hides well\nA whole line. Listed as one text.\n", encoding="utf-8")
    options = CorpusOptions(min_words=2, exclude=(str(listed),))
    counts: dict[str, int] = {}
    kept = list(iter_sentences([str(corpus)], options, counts))
    assert kept == ["Cats sleep all day.", "Dogs bark at night.", "Birds sing in the morning."]
    assert counts == {str(corpus): 3}  # the okapi sentence and the two sentences of the listed line
    # the same through the reader's child process, counts included
    counts_child: dict[str, int] = {}
    assert list(background_sentences([str(corpus)], options, excluded=counts_child)) == kept
    assert counts_child == counts
    # the key depends on the listed content, not on the file's name
    renamed = tmp_path / "renamed.txt"
    renamed.write_bytes(listed.read_bytes())
    assert CorpusOptions(exclude=(str(renamed),)).key() == CorpusOptions(exclude=(str(listed),)).key()
    assert "exclude" not in CorpusOptions().key()  # keys of runs without a list stay as they were


def test_counts_are_per_corpus_file(tmp_path: Path) -> None:
    # two files holding 1 and 2 listed sentences: each file's own count, not a running total
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    kept = ["Cats sleep all day long.", "Dogs bark at the moon."]
    first.write_text("\n".join([kept[0], *marked(1)]) + "\n", encoding="utf-8")
    second.write_text("\n".join([kept[1], *marked(2, 10)]) + "\n", encoding="utf-8")
    listed = tmp_path / "listed.txt"
    listed.write_text("\n".join(marked(1) + marked(2, 10)) + "\n", encoding="utf-8")
    options = CorpusOptions(min_words=2, exclude=(str(listed),))
    sources = [str(first), str(second)]
    expected = {str(first): 1, str(second): 2}
    counts: dict[str, int] = {}
    assert list(iter_sentences(sources, options, counts)) == kept and counts == expected
    drawn: dict[str, int] = {}  # the short-sentence draw reads through the child process
    assert list(background_sentences(sources, options, excluded=drawn)) == kept
    assert drawn == expected


def swe_settings(folder: Path, **changes: object) -> SWESettings:
    kd = KDSettings(batch_size=32, eval_every=10, max_steps=30, dev_size=100)
    # kd_short: every eligible short sentence, so an excluded one would be drawn
    return tiny_swe(folder / "corpus.txt", **{"vocab_size": 500, "kd": kd, "kd_short": 100_000, **changes})


def build(folder: Path, tokenizer: Tokenizer, out: str, **changes: object) -> tuple[RecordingTeacher, dict]:
    teacher = RecordingTeacher(tokenizer)
    settings = swe_settings(folder, **changes)
    Pipeline(settings, folder / out, teacher=teacher, show_progress=False).run(dtype="float32")  # type: ignore[arg-type]
    return teacher, staticsem.load(folder / out).metadata


@pytest.mark.parametrize("listing", ["sentences", "sha1"])
def test_distill_excludes_from_the_corpus_the_short_sentences_and_the_kd_corpus(
    tmp_path: Path, subword_tokenizer: Tokenizer, listing: str
) -> None:
    lines = write_corpus(tmp_path / "corpus.txt").read_text().splitlines()
    (tmp_path / "corpus.txt").write_text("\n".join([*lines, *marked(30)]) + "\n", encoding="utf-8")
    domain = write_corpus(tmp_path / "domain.txt", count=200, seed=5).read_text().splitlines()
    (tmp_path / "domain.txt").write_text("\n".join([*domain, *marked(20, 100)]) + "\n", encoding="utf-8")
    listed = [text.upper().replace(".", " !") for text in marked(30) + marked(20, 100)]  # other case/marks
    exclude = tmp_path / ("eval.txt" if listing == "sentences" else "eval.sha1")
    body = listed if listing == "sentences" else [sentence_hash(t) for t in listed]
    exclude.write_text("\n".join(body) + "\n", encoding="utf-8")
    kd_corpus = (str(tmp_path / "domain.txt"),)

    # without the list the marked sentences are chosen, drawn as short sentences and read as KD text
    plain, _ = build(tmp_path, subword_tokenizer, "plain", kd_corpus=kd_corpus)
    assert any(MARK in t for t in plain.texts)
    clean = {"kd_corpus": kd_corpus, "exclude": (str(exclude),)}
    teacher, metadata = build(tmp_path, subword_tokenizer, "clean", **clean)
    work = tmp_path / ".clean.work"
    vocab = json.loads((work / "vocab.json").read_text())
    targets = json.loads((work / "targets.json").read_text())["sentences"]
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    assert MARK not in vocab["words"] and not any(MARK in t for t in teacher.texts)
    assert not any(MARK in t for t in targets + chosen) and len(targets) > 200  # short and KD text still come
    steps = metadata["steps"]
    assert steps["vocab"]["excluded"] == {str(tmp_path / "corpus.txt"): 30}
    assert steps["targets"]["excluded"] == {str(tmp_path / "domain.txt"): 20}
    assert metadata["settings"]["exclude"] == [str(exclude)]
    # the list is part of every step's key: nothing of the plain run was reused
    plain_keys = json.loads((tmp_path / ".plain.work" / "vocab.json").read_text())["key"]
    assert vocab["key"] != plain_keys


def test_cli_takes_exclude_and_names_a_missing_file(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.txt")
    missing = str(tmp_path / "nope.sha1")
    command = ["distill", "--corpus", str(corpus), "--exclude", missing, "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and "nope.sha1: --exclude file is missing" in result.output
    assert not (tmp_path / "m").exists()
