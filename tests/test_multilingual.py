"""Models over many languages: tags, the vocabulary budget, checks before any teacher pass, short sentences
per language, pieces of a SentencePiece teacher, the languages a model records."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from tokenizers.models import Unigram

import staticsem
from fakes import FakeTeacher, corpus_tokenizer, write_parallel
from staticsem.distillation.corpus.languages import apportion, check_languages, share_vocabulary
from staticsem.distillation.methods.swe import rows as swe_rows
from staticsem.distillation.methods.swe.alignment import short_by_language
from staticsem.distillation.methods.swe.languages import check_coverage, short_counts
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.methods.swe.rows import piece_text
from staticsem.distillation.methods.swe.settings import with_splitter
from staticsem.distillation.stages.align_settings import AlignSettings
from staticsem.distillation.stages.kd import KDSettings, Regression
from staticsem.errors import InputError
from staticsem.io import load
from staticsem.text import make_splitter

TRAINING = KDSettings(lr=1e-2, batch_size=32, eval_every=10, patience=5, max_steps=60, dev_size=50)
# the alignment as the models before --align-components and --align-lr had it (8 dimensions here)
ALIGN = AlignSettings(steps=60, components=4, lr=TRAINING.lr)


def write_three(folder: Path) -> Path:
    """English, "German" (z-prefixed words) and a third language built like German (q-prefixed words)."""
    write_parallel(folder, count=600)
    lines = (folder / "english.txt").read_text(encoding="utf-8").splitlines()
    third = [" ".join("q" + w if w != "tom" else w for w in line.lower().split()) for line in lines[:300]]
    (folder / "swedish.txt").write_text("\n".join(third) + "\n", encoding="utf-8")
    return folder


@pytest.fixture()
def three(tmp_path: Path) -> Path:
    return write_three(tmp_path)


ALIGN_BEFORE = "1f8ba2be9080a2be"  # align key of the default three-language settings before --align-pieces


def settings(folder: Path, **changes: object) -> SWESettings:
    base: dict[str, object] = {
        "corpus": (
            f"en={folder / 'english.txt'}",
            f"de={folder / 'german.txt'}",
            f"sv={folder / 'swedish.txt'}",
        ),
        "vocab_size": 150,
        "min_count": 2,
        "sentences_per_word": 20,
        "batch_size": 16,
        "pca_sentences": 500,
        "remove_top": 1,
        "dim": 8,
        "kd": TRAINING,
        "kd_short": None,
        "align": ALIGN,
    }
    return SWESettings(**{**base, **changes})  # type: ignore[arg-type]


def pipeline(folder: Path, teacher: FakeTeacher, out: str = "model", **changes: object) -> Pipeline:
    return Pipeline(
        settings(folder, **changes),
        folder / out,
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        save_every=0.0,
    )


def reader(folder: Path) -> Tokenizer:
    return corpus_tokenizer(*(folder / f for f in ("english.txt", "german.txt", "swedish.txt")))


# ---------------------------------------------------------------- tags and shares
def test_language_tags_must_be_language_codes(three: Path) -> None:
    check_languages(["en", "de", "pt-BR", "zh_Hans"])
    with pytest.raises(InputError, match="corpus tag 'xx' is not a language code"):
        check_languages(["en", "xx"])
    for tag in ("eng", "english", "deu", "german", "fra-CA"):  # three letters or more: not ISO 639-1
        with pytest.raises(InputError, match=f"corpus tag '{tag}' is not a language code"):
            check_languages([tag])
    corpus = (f"en={three / 'english.txt'}", f"xx={three / 'german.txt'}")
    with pytest.raises(InputError, match="'xx' is not a language code"):
        settings(three, corpus=corpus).validate()  # the settings' own check, before any teacher loads
    with pytest.raises(InputError, match="'qq' is not a language code"):
        settings(three, corpus=(str(three / "english.txt"),), languages=("en", "qq")).validate()


def test_vocabulary_budget_is_shared_equally_or_by_corpus_size() -> None:
    assert share_vocabulary(10, {"en": 5, "de": 1, "sv": 1}, "equal") == {"en": 4, "de": 3, "sv": 3}
    assert share_vocabulary(100, {"en": 800, "de": 100, "sv": 100}, "corpus") == {
        "en": 80,
        "de": 10,
        "sv": 10,
    }
    assert sum(share_vocabulary(1001, {"a": 3, "b": 7, "c": 11}, "corpus").values()) == 1001
    assert share_vocabulary(3, {"a": 1000, "b": 1, "c": 1}, "corpus") == {"a": 1, "b": 1, "c": 1}
    with pytest.raises(InputError, match="leaves a language no word"):
        share_vocabulary(2, {"a": 1, "b": 1, "c": 1}, "equal")
    assert apportion(7, {"a": 0.0, "b": 0.0}) == {"a": 4, "b": 3}
    # largest remainders first: 10 split 1:2 is 3.33 / 6.67, so the spare word goes to the second
    assert apportion(10, {"a": 1.0, "b": 2.0}) == {"a": 3, "b": 7}
    assert apportion(10, {"a": 2.0, "b": 1.0}) == {"a": 7, "b": 3}
    assert apportion(11, {"a": 1.0, "b": 1.0, "c": 1.0, "d": 6.0}) == {"a": 1, "b": 1, "c": 1, "d": 8}
    assert short_counts(90, {"en": 60, "de": 20, "sv": 10}) == {"en": 60, "de": 20, "sv": 10}


def test_each_language_runs_with_its_share_of_the_words(three: Path) -> None:
    teacher = FakeTeacher(reader(three))
    equal = pipeline(three, teacher, vocab_split="equal")
    assert {lang: run.settings.vocab_size for lang, run in equal.subruns.items()} == {
        "en": 50,
        "de": 50,
        "sv": 50,
    }
    by_size = pipeline(three, teacher, "sized", vocab_split="corpus")  # 600, 600 and 300 lines
    assert {lang: run.settings.vocab_size for lang, run in by_size.subruns.items()} == {
        "en": 60,
        "de": 60,
        "sv": 30,
    }


def test_a_spaceless_language_gets_the_greedy_splitter_and_spaced_ones_words_in_stage_1(three: Path) -> None:
    assert with_splitter(settings(three)).splitter == "words"
    zh = settings(three, corpus=(f"en={three / 'english.txt'}", f"zh={three / 'german.txt'}"))
    assert with_splitter(zh).splitter == "greedy"
    assert with_splitter(replace(zh, splitter="words")).splitter == "words"  # asked for: kept
    teacher = FakeTeacher(reader(three))
    run = Pipeline(zh, three / "zh", teacher=teacher, show_progress=False)  # type: ignore[arg-type]
    assert run.settings.splitter == "greedy"
    assert {lang: r.settings.splitter for lang, r in run.subruns.items()} == {"en": "words", "zh": "greedy"}
    asked = Pipeline(replace(zh, splitter="subword"), three / "asked", teacher=teacher)  # type: ignore[arg-type]
    assert {r.settings.splitter for r in asked.subruns.values()} == {"subword"}


def test_the_greedy_splitter_cuts_unspaced_runs_into_the_longest_pieces() -> None:
    # 挪威 and 政府 are pieces too: the longest match, 挪威政府, is one word (not 挪威 + 政府)
    pieces = ["<unk>", "\u2581我", "赞", "赏", "首相", "首", "女士", "挪威", "挪威政府", "政府"]
    pieces += ["▁hello", "ab"]
    tokenizer = Tokenizer(Unigram([(p, -1.0) for p in pieces], unk_id=0))
    greedy = make_splitter("greedy", tokenizer)
    assert greedy.words("我赞赏首相女士和挪威政府。") == ["我", "赞", "赏", "首相", "女士", "和", "挪威政府"]
    assert greedy.words("首相x首 hello, world") == ["首相", "x", "首", "hello", "world"]
    assert greedy.words("挪威政府挪威") == ["挪威政府", "挪威"]
    assert greedy.words("Tom's dog barks.") == make_splitter("words").words("Tom's dog barks.")
    text = "Der 首相女士 sprach"
    assert (
        [text[a:b] for a, b in greedy.spans(text)] == greedy.words(text) == ["Der", "首相", "女士", "sprach"]
    )
    assert greedy.words("我赞赏首相女士和挪威政府。") == greedy.words(
        "我赞赏首相女士和挪威政府。"
    )  # cached run


def test_sentencepiece_pieces_reach_the_teacher_without_their_word_mark() -> None:
    assert piece_text("\u2581hello") == "hello"
    assert piece_text("##ing") == "ing"
    assert piece_text("\u2581") == "#" and piece_text("lo") == "lo"
    unigram = Tokenizer(Unigram([("<unk>", 0.0), ("\u2581dog", -1.0), ("s", -2.0)], unk_id=0))
    assert [piece_text(unigram.id_to_token(i) or "") for i in range(3)] == ["<unk>", "dog", "s"]


def test_a_language_is_read_when_its_tokens_a_character_stay_under_its_scripts_limit() -> None:
    """Every character a token: spaced text (0.77 a character) is too many for a spaced language's limit
    (0.5) and Chinese or Japanese text (1.0) is within theirs (1.0); an unknown-free, dense-enough reader."""
    from tokenizers import models, normalizers, pre_tokenizers

    english = ["the cat sat on the mat", "a dog ran in the house"]
    chinese = ["我赞赏首相女士", "挪威政府和首相"]
    chars = sorted({c for text in english + chinese for c in text if c != " "})
    pieces = ["[UNK]", *chars, *(f"##{c}" for c in chars)]  # one token a character
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    check_coverage(tokenizer, {"zh": chinese, "ja": chinese}, "chars")
    refused = "it reads en as 0.77 tokens a character, 0.0 % unknown .at most 0.5 "
    with pytest.raises(InputError, match=refused):
        check_coverage(tokenizer, {"zh": chinese, "en": english}, "chars")
    with pytest.raises(InputError, match="it reads de as"):
        check_coverage(tokenizer, {"de": english}, "chars")


def test_a_language_with_more_than_one_percent_unknown_tokens_is_not_read() -> None:
    from tokenizers import models, normalizers, pre_tokenizers

    words = [f"w{i}" for i in range(40)]
    sentences = [" ".join(words[i : i + 20]) for i in range(0, 20)]  # 20 words, whole tokens each
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, "[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    check_coverage(tokenizer, {"de": sentences}, "words")
    one_in_twenty = [s + " zz" for s in sentences]  # 1 unknown token in 21: 4.8 %
    with pytest.raises(InputError, match="it reads de as 0.26 tokens a character, 4.8 % unknown"):
        check_coverage(tokenizer, {"de": one_in_twenty}, "words")


def test_the_corpus_split_counts_every_file_of_a_language(three: Path) -> None:
    lines = (three / "german.txt").read_text(encoding="utf-8")
    (three / "german2.txt").write_text(lines, encoding="utf-8")  # German: two files of 600 lines
    corpus = (
        f"en={three / 'english.txt'}",
        f"de={three / 'german.txt'}",
        f"de={three / 'german2.txt'}",
        f"sv={three / 'swedish.txt'}",
    )
    teacher = FakeTeacher(reader(three))
    run = pipeline(three, teacher, "sized", corpus=corpus, vocab_split="corpus", vocab_size=150)
    assert {lang: r.settings.vocab_size for lang, r in run.subruns.items()} == {"en": 43, "de": 86, "sv": 21}
    assert run.subruns["de"].settings.corpus == (str(three / "german.txt"), str(three / "german2.txt"))


def test_each_languages_map_is_fitted_on_its_sentences_own_teacher_embeddings(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With fewer --align-sentences than a language chose, the sample's targets are those sentences'."""
    from staticsem.distillation.methods.swe import alignment

    seen = {}
    real = alignment.fit_language_maps

    def recording(model, samples, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(samples)
        return real(model, samples, *args, **kwargs)

    monkeypatch.setattr(alignment, "fit_language_maps", recording)
    teacher = FakeTeacher(reader(three))
    run = pipeline(three, teacher, align=replace(ALIGN, sentences=40), kd_short=0)
    run.run(dtype="float32")
    for language, sub in run.subruns.items():
        chosen = sub.records["select"]["sentences"]
        embeddings = load_file(str(sub.work.folder / "stage1.safetensors"))["embeddings"]
        own = {sentence: embeddings[i] for i, sentence in enumerate(chosen)}
        sample = seen[language]
        assert len(sample.sentences) == 40 < len(chosen)
        np.testing.assert_array_equal(sample.targets, np.stack([own[s] for s in sample.sentences]))


# ---------------------------------------------------------------- bad input: before any teacher pass
def test_a_teacher_that_cannot_read_the_languages_is_refused_before_any_pass(
    three: Path, subword_tokenizer: Tokenizer
) -> None:
    teacher = FakeTeacher(subword_tokenizer)  # knows a dozen English pieces
    with pytest.raises(InputError, match="no multilingual tokenizer: it reads en as .* % unknown"):
        pipeline(three, teacher).run()
    assert teacher.sentences == 0
    assert not (three / "model").exists()


def test_a_language_with_no_sentence_left_is_refused_before_any_pass(three: Path) -> None:
    (three / "swedish.txt").write_text("kort.\nen två.\n", encoding="utf-8")  # under --min-words 3
    teacher = FakeTeacher(reader(three))
    with pytest.raises(InputError, match="^sv: the corpus holds no usable sentence"):
        pipeline(three, teacher).run()
    assert teacher.sentences == 0


def test_a_resumed_run_given_other_languages_is_refused_and_keeps_the_work(three: Path) -> None:
    teacher = FakeTeacher(reader(three))
    pipeline(three, teacher, stages=("extract",)).run()
    work = three / ".model.work"
    before = {p: p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()}
    passes = teacher.sentences
    two = (f"en={three / 'english.txt'}", f"de={three / 'german.txt'}")
    with pytest.raises(InputError, match="holds a build in en,de,sv, not en,de: give another --out"):
        pipeline(three, teacher, corpus=two, stages=("extract",)).run()
    assert teacher.sentences == passes
    assert {p: p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()} == before


# ---------------------------------------------------------------- a whole build
def test_a_three_language_build_records_languages_and_draws_short_sentences_per_language(
    three: Path,
) -> None:
    teacher = FakeTeacher(reader(three))
    model = pipeline(three, teacher, fallback="pieces", kd_short=120).run(dtype="float32")
    saved = staticsem.load(three / "model")
    assert saved.pieces is not None and saved.pieces.weight == 1.0  # several languages: a piece counts whole
    assert saved.metadata["languages"] == ["en", "de", "sv"]
    assert json.loads((three / "model" / "config.json").read_text())["metadata"]["languages"] == [
        "en",
        "de",
        "sv",
    ]
    merge = model.metadata["steps"]["merge"]["languages"]
    assert {"dog", "zdog", "qdog"} <= set(saved.vocab)
    assert all(merge[lang]["words"] <= 50 for lang in ("en", "de", "sv"))  # each its share of 150
    assert targets_short(three) == 120
    work = three / ".model.work"
    targets = json.loads((work / "targets.json").read_text())
    short = targets["sentences"][-targets["short"] :]
    chosen = {lang: merge[lang]["sentences_chosen"] for lang in merge}
    drawn = {
        "en": sum(1 for s in short if "zdog" not in s.lower() and not _third(s) and not _german(s)),
        "de": sum(1 for s in short if _german(s)),
        "sv": sum(1 for s in short if _third(s)),
    }
    assert drawn == short_counts(targets["short"], chosen) == targets["short_languages"], (drawn, chosen)
    assert drawn["sv"] > 0 and drawn["de"] > 0 and drawn["en"] > 0
    # every short sentence recorded for a language (what the refinement reads) is of that language
    of_language = {"en": lambda s: not _german(s) and not _third(s), "de": _german, "sv": _third}
    recorded = short_by_language(work, targets)
    assert {lang: len(sample.sentences) for lang, sample in recorded.items()} == drawn
    for lang, sample in recorded.items():
        assert all(of_language[lang](s) for s in sample.sentences), lang
    np.testing.assert_allclose(np.linalg.norm(saved.encode(["zdog qdog dog"]), axis=1), 1.0, rtol=1e-5)
    # the languages are aligned last: the model is the aligned stage 3, fitted on each language's sentences
    assert model.metadata["steps"]["align"]["sentences"] == chosen
    # then refined on every chosen and short sentence of each language
    refined = model.metadata["steps"]["align"]["refine"]
    assert refined["sentences"] == {lang: chosen[lang] + drawn[lang] for lang in chosen}
    assert 0 < refined["steps"] <= 60 and refined["dev_loss_best"] < refined["dev_loss_start"]
    np.testing.assert_array_equal(saved.vectors, staticsem.load(work / "aligned").vectors)
    passes = teacher.sentences
    plain = Pipeline(
        settings(three, fallback="pieces", kd_short=120, align=replace(ALIGN, languages=False)),
        three / "plain",
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        work_dir=work,
    ).run(dtype="float32")
    assert teacher.sentences == passes and "align" not in plain.metadata["steps"]  # every step reused
    np.testing.assert_array_equal(plain.vectors, staticsem.load(work / "stage3").vectors)
    assert not np.allclose(plain.vectors, saved.vectors, atol=1e-3)
    maps_only = Pipeline(
        settings(three, fallback="pieces", kd_short=120, align=replace(ALIGN, steps=0)),
        three / "maps",
        teacher=teacher,  # type: ignore[arg-type]
        show_progress=False,
        work_dir=work,
    ).run(dtype="float32")
    assert "refine" not in maps_only.metadata["steps"]["align"]  # --align-steps 0: the maps alone
    assert teacher.sentences == passes  # only the align step reran
    assert not np.allclose(maps_only.vectors, saved.vectors, atol=1e-4)
    # the refinement starts from the maps applied to stage 3: the refined rows are those plus its change,
    # far nearer them than stage 3's own, and the pieces no sentence uses keep them exactly
    change = np.linalg.norm(saved.vectors - maps_only.vectors)
    assert change < 0.5 * np.linalg.norm(saved.vectors - plain.vectors)
    assert saved.pieces is not None and maps_only.pieces is not None
    untouched = np.all(saved.pieces.vectors == maps_only.pieces.vectors, axis=1)
    assert untouched.sum() > 0


def test_short_sentences_come_after_the_kd_only_text_in_the_targets(three: Path) -> None:
    """With --kd-corpus, the targets hold its sentences first: each language's short sentences are still
    its own (and none of the KD-only text)."""
    extra = three / "extra.txt"
    extra.write_text("\n".join(f"Xa xb xc{i} xd xe." for i in range(30)) + "\n", encoding="utf-8")
    teacher = FakeTeacher(reader(three))
    pipeline(three, teacher, kd_short=60, kd_corpus=(str(extra),)).run(dtype="float32")
    work = three / ".model.work"
    targets = json.loads((work / "targets.json").read_text())
    assert len(targets["sentences"]) == 30 + targets["short"]
    recorded = short_by_language(work, targets)
    of_language = {"en": lambda s: not _german(s) and not _third(s), "de": _german, "sv": _third}
    for lang, sample in recorded.items():
        assert sample.sentences and all(of_language[lang](s) and "xb" not in s for s in sample.sentences)


def test_a_stopped_refinement_resumes_from_its_last_evaluation(
    three: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    teacher = FakeTeacher(reader(three))
    whole = pipeline(three, teacher).run(dtype="float32")
    work = three / ".model.work"
    (work / "align.json").unlink()  # as if the align step had never finished: it alone runs again
    real, calls = Regression.loss, []

    def stopping(self: Regression, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        calls.append(len(rows))
        if len(calls) > 25:  # a kill in the middle of the refinement
            raise KeyboardInterrupt
        return real(self, table, rows, sparse)

    monkeypatch.setattr(Regression, "loss", stopping)
    with pytest.raises(KeyboardInterrupt):
        pipeline(three, teacher).run(dtype="float32")
    assert (work / "align.partial.safetensors").is_file()
    monkeypatch.setattr(Regression, "loss", real)
    passes = teacher.sentences
    with caplog.at_level(logging.INFO, logger="staticsem.distillation.stages.training"):
        resumed = pipeline(three, teacher).run(dtype="float32")
    assert "training resumes at step" in caplog.text  # seeded: a fresh start would end alike
    assert teacher.sentences == passes and not (work / "align.partial.safetensors").exists()
    np.testing.assert_allclose(resumed.vectors, whole.vectors, rtol=1e-6, atol=1e-7)


def targets_short(folder: Path) -> int:
    return int(json.loads((folder / ".model.work" / "targets.json").read_text())["short"])


def _german(sentence: str) -> bool:
    return any(w.startswith("z") and w != "tom" for w in sentence.lower().rstrip(".").split())


def _third(sentence: str) -> bool:
    return any(w.startswith("q") for w in sentence.lower().rstrip(".").split())


def test_the_pieces_step_resumes_from_its_last_saved_chunk(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(swe_rows, "PIECE_CHUNK", 16)
    monkeypatch.setattr(swe_rows, "PIECE_BATCH", 8)
    tokenizer = reader(three)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    teacher = FakeTeacher(tokenizer)
    pipeline(three, teacher, stages=("extract",)).run()  # stage 1 and its passes first
    stage1 = teacher.sentences
    # the pieces step's fourth batch (the second of its second chunk) fails: one whole chunk (16) was saved
    teacher.fail_after, teacher.batches = 3, 0
    with pytest.raises(KeyboardInterrupt):
        pipeline(three, teacher, fallback="pieces").run()
    assert (three / ".model.work" / "pieces-chunks").is_dir()
    teacher.fail_after = None
    teacher.sentences = stage1
    pipeline(three, teacher, fallback="pieces").run()
    short = json.loads((three / ".model.work" / "targets.json").read_text())["teacher_passes"]
    assert teacher.sentences - stage1 - short == size - 16  # the saved chunk is not passed again
    assert not (three / ".model.work" / "pieces-chunks").exists()


def test_fitted_piece_map_is_fitted_on_the_maps_samples_and_reruns_only_the_alignment(
    three: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--align-pieces fitted: the pieces get a map of their own, fitted on the sentences the languages'
    maps were; only the alignment's key changes, and its record says which map the pieces took."""
    from staticsem.distillation.methods.swe import alignment

    seen: dict[str, Any] = {}

    def recording(name: str):  # type: ignore[no-untyped-def]
        real = getattr(alignment, name)

        def call(model, samples, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen[name] = dict(samples) if name != "align_rows" else args[-1] if len(args) > 1 else None
            seen[f"{name} returned"] = found = real(model, samples, *args, **kwargs)
            return found

        return call

    for name in ("fit_language_maps", "fit_piece_map", "align_rows"):
        monkeypatch.setattr(alignment, name, recording(name))
    teacher = FakeTeacher(reader(three))
    plain = pipeline(three, teacher, kd_short=0, align=replace(ALIGN, steps=0))
    plain.run(dtype="float32")
    assert "fit_piece_map" not in seen and plain.records["align"]["pieces"] == "mean"
    assert seen["align_rows"] is None  # the mean map
    before = load(three / "model")
    fitted = pipeline(three, teacher, kd_short=0, align=replace(ALIGN, steps=0, pieces="fitted"))
    fitted.run(dtype="float32")
    assert {k for k in plain.keys if plain.keys[k] != fitted.keys[k]} == {"align"}
    assert fitted.records["align"]["pieces"] == "fitted"
    assert seen["fit_piece_map"].keys() == seen["fit_language_maps"].keys() == {"en", "de", "sv"}
    assert seen["align_rows"] is seen["fit_piece_map returned"]
    np.testing.assert_array_equal(before.vectors, load(three / "model").vectors)  # the words' maps as before
    refined = pipeline(
        three, teacher, kd_short=0, align=replace(ALIGN, pieces="fitted")
    )  # the refinement runs after the maps
    refined.run(dtype="float32")
    config = json.loads((three / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["metadata"]["steps"]["align"]["pieces"] == "fitted"
    assert config["metadata"]["settings"]["align"]["pieces"] == "fitted"


def test_a_build_without_align_pieces_keeps_the_alignment_key_it_had(three: Path) -> None:
    run = pipeline(three, FakeTeacher(reader(three)), hand_over=False)  # the default then
    assert run.keys["align"] == ALIGN_BEFORE  # the key the code before --align-pieces gave these settings


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"align": replace(ALIGN, pieces="own")}, "align-pieces must be one of mean, fitted"),
        (
            {"align": replace(ALIGN, pieces="fitted"), "fallback": "prefix"},
            "align-pieces fitted .* needs --fallback pieces",
        ),
        ({"align": replace(ALIGN, components=8)}, "align-components must be 0 or more and below --dim 8"),
        ({"align": replace(ALIGN, lr=0.0)}, "align-lr must be positive"),
        ({"align": replace(ALIGN, lr=-1e-3)}, "align-lr must be positive"),
        ({"align": replace(ALIGN, components=-1)}, "align-components must be 0 or more"),
        ({"align": replace(ALIGN, steps=-1)}, "align-steps must be 0 or more, got -1"),
        ({"align": replace(ALIGN, sentences=0)}, "align-sentences must be above --dim 8, got 0"),
        ({"align": replace(ALIGN, sentences=8)}, "align-sentences must be above --dim 8, got 8"),
    ],
)
def test_a_bad_align_pieces_is_refused_before_any_teacher_pass(
    three: Path, changes: dict[str, str], says: str
) -> None:
    teacher = FakeTeacher(reader(three))
    with pytest.raises(InputError, match=says):
        pipeline(three, teacher, **changes).run()
    assert teacher.sentences == 0
    assert not (three / "model").exists()
