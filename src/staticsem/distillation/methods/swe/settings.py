"""The settings of SWE and of its stage 1 alone (ASE), recorded in a model's config.json, and their checks."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from staticsem.distillation.corpus.edits import EditSettings
from staticsem.distillation.corpus.exclude import EXCLUDE_HELP, check_exclude_files
from staticsem.distillation.corpus.languages import SPLITS, needs_subword
from staticsem.distillation.corpus.phrase_choice import PhraseSettings, read_phrase_list
from staticsem.distillation.corpus.reading import EMBEDDED, check_sources
from staticsem.distillation.corpus.sampling import check_splitter, word_targets
from staticsem.distillation.method import setting
from staticsem.distillation.methods.swe.search_step import check_search_rows
from staticsem.distillation.stages.align_settings import AlignSettings
from staticsem.distillation.stages.crosslingual import corpus_languages, language_sources
from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.distillation.teachers.backends import AUTO, BACKEND_HELP, PRECISION_HELP, check_teacher
from staticsem.errors import InputError
from staticsem.modes import SEARCH_PIECE_WEIGHT

STAGES = ("extract", "pca", "kd")
# Teachers this wide or wider read word states from their second-to-last layer: all-mpnet-base-v2 (768 d,
# 12 layers) gives +0.5 STS mean from layer 11 over its last (70.90 vs 70.38, the best of layers 6-12 and
# their means), all-MiniLM-L6-v2 (384 d) the same from either (70.52 vs 70.45), so it keeps its last
# (studies/README.md §teacher_levers.py). Width and temperature did not depend on the teacher there.
WIDE_TEACHER = 768
OBJECTIVES = ("kd", "contrastive", "both")
FALLBACKS = ("pieces", "prefix")
SHORT_WORDS = (5, 15)  # words of a --kd-short sentence
# the default short-sentence count: SHORT_PER_CHOSEN per sentence stage 1 chose (a short pass costs about
# half a chosen one, so stage 3's targets take about 60 % of stage 1's teacher time), stopping at
# SHORT_DEFAULT_MAX: MiniLM's STS mean gains +0.45 for the first 80k, +0.1 for the next 80k and keeps
# rising slowly to 320k (studies/README.md, kd_ceiling.py); mpnet's gains nothing past 80k
SHORT_PER_CHOSEN = 1.25
SHORT_DEFAULT_MAX = 160_000


@dataclass(frozen=True)
class ASESettings:
    """Everything that decides stage 1, contextual extraction (the whole of an ASE model)."""

    corpus: tuple[str, ...] = setting(
        (EMBEDDED,),
        "Text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'; LANG=FILE tags a language "
        "(several languages make a cross-lingual model).",
    )
    teacher: str | None = setting(
        None, "Sentence Transformer folder or hub name [default: packaged all-MiniLM-L6-v2]."
    )
    # 100k words with the rare-word taper below and the pieces: word similarity 69.96 -> 71.34, SciFact dense
    # 49.51 -> 53.16, STS mean 73.50 -> 73.80 in 1.28x the time of 50k (with SWE's defaults)
    # (studies/README.md §vocabulary_curve.py)
    vocab_size: int = setting(100_000, "Words to keep.")
    min_count: int = setting(3, "Minimum corpus count of a vocabulary word.")
    vocabulary: str | None = setting(
        None, "Word list (most frequent first) instead of the corpus's top words."
    )
    sentences_per_word: int = setting(10, "Occurrences each word should get.")
    # words ranked past rare_after each bring their own sentences (no pass sharing): fewer of them keep a
    # bigger vocabulary cheap (studies/README.md §vocabulary_curve.py)
    rare_after: int | None = setting(
        50_000,
        "Words ranked past this get --sentences-per-rare-word occurrences (at --vocab-size or more: every "
        "word the same).",
    )
    sentences_per_rare_word: int = setting(3, "Occurrences each word ranked past --rare-after should get.")
    select_threshold: float = setting(
        1.0, "A sentence is chosen when the shares of its under-filled words add up to this."
    )
    min_words: int = setting(3, "Skip shorter sentences.")
    max_words: int = setting(64, "Skip longer sentences (the teacher reads them whole).")
    max_corpus_sentences: int | None = setting(
        None, "Read at most this many corpus sentences.", option="max-sentences"
    )
    exclude: tuple[str, ...] = setting((), EXCLUDE_HELP)
    # sentences per teacher pass: 32 ran 5-15 % faster than 64 with onnx-int8 in paired 3,000-sentence
    # rounds (less padding, smaller activations to quantise), ~1 % on the whole full-recipe extraction
    batch_size: int = setting(32, "Sentences per teacher pass (on the CPU).")
    # on a GPU the passes take sentences sorted by token count up to this padded size (the CPU keeps
    # batch_size sentences sorted by length, so CPU builds stay as they were)
    batch_tokens: int = setting(
        65_536, "Tokens per teacher pass on a GPU (sentences × the longest's tokens)."
    )
    layer: int | None = setting(
        None,
        "Teacher layer for stage 1 (0 = embeddings, -1 = last) [SWE: the second-to-last for teachers 768 "
        "wide or wider, else the last].",
    )
    languages: tuple[str, ...] = setting(
        (), "Split an untagged corpus into these languages (e.g. en,de; py3langid).", comma=True
    )
    language: str | None = setting(None, "Set on a per-language run of an untagged corpus.", hidden=True)
    prompt: str | None = setting(
        None, "Teacher prompt name (e.g. query) or text put before each sentence [the teacher's default]."
    )
    splitter: str | None = setting(
        None,
        "Word splitting: words (spaces and punctuation), subword (Chinese, Japanese, Thai... runs become the "
        "teacher tokenizer's pieces) or greedy (those runs cut into the longest of the teacher's pieces, "
        "left to right: as fast as words) [default: greedy when a corpus is tagged zh, ja, th..., else "
        "words].",
    )
    vocab_split: str = setting(
        "equal",
        "Corpora tagged with several languages: --vocab-size is the model's words, shared equally by the "
        "languages (equal) or in proportion to their corpus lines (corpus).",
    )
    # the 12-language build (fr, vi, zh, ja leave 60,480 of 360,000 words unused at --min-count 3), held
    # back (STS-B test, 7 languages): en–X 52.16 → 53.27, alone 68.75 → 68.89, English 72.79 → 74.74;
    # 54.4 min against 51.5 on 2 cores, 295 MB against 270 (docs/recipes.md)
    hand_over: bool = setting(
        True,
        "Several languages: what a language cannot use of its share (--vocab-size words with --min-count, "
        "short sentences) goes to the others: words to English first, short sentences by chosen ones.",
    )
    check_tokenizer: bool = setting(
        True,
        "Several languages: refuse a teacher whose tokenizer does not read each of them (a sample of its "
        "corpus in few tokens a character, almost none unknown).",
    )
    teacher_backend: str = setting(AUTO, BACKEND_HELP)
    teacher_precision: str = setting(AUTO, PRECISION_HELP)
    seed: int = setting(0, "Random seed (same seed and inputs, same model).")
    # multi-word units with rows of their own (staticsem.phrases), chosen as Mikolov et al. (2013) chose
    # them (studies/README.md §phrases.py)
    phrases: int = setting(
        0,
        "Phrases of two or three words (New York, heart attack) chosen from the corpus, each a row of its "
        "own [0: none].",
    )
    phrases_from: str | None = setting(
        None, "Your own phrases (one a line, words separated by spaces), added to the chosen ones."
    )
    phrase: PhraseSettings = setting(factory=PhraseSettings, help="Phrases.", prefix="phrase")

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        if self.phrases < 0:
            raise InputError(f"--phrases must be 0 or more, got {self.phrases}")
        self.phrase.validate()
        if self.phrases_from is not None:
            read_phrase_list(Path(self.phrases_from), self.phrase.max_words)
        for name in (
            "vocab_size",
            "min_count",
            "sentences_per_word",
            "sentences_per_rare_word",
            "batch_size",
            "batch_tokens",
        ):
            if getattr(self, name) < 1:
                raise InputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if not 1 <= self.min_words <= self.max_words:
            raise InputError(f"need 1 <= min-words <= max-words, got {self.min_words} and {self.max_words}")
        if self.rare_after is not None and self.rare_after < 0:
            raise InputError(f"rare-after must be 0 or more, got {self.rare_after}")
        if self.splitter is not None:
            check_splitter(self.splitter)
        if self.vocab_split not in SPLITS:
            raise InputError(f"--vocab-split must be one of {', '.join(SPLITS)}, got {self.vocab_split!r}")
        language_sources(self)  # corpus tags are language codes, all tagged or none: before the teacher loads
        check_teacher(self.teacher_backend, self.teacher_precision)
        check_sources(self.corpus)
        check_exclude_files(self.exclude)

    def word_targets(self, words: int) -> list[int]:
        """Occurrences each of ``words`` vocabulary words (most frequent first) should get."""
        return word_targets(words, self.sentences_per_word, self.rare_after, self.sentences_per_rare_word)

    def tapers(self) -> bool:
        """Whether some vocabulary words get fewer occurrences (keys of other runs stay as they were)."""
        return self.rare_after is not None and self.rare_after < self.vocab_size


@dataclass(frozen=True)
class SWESettings(ASESettings):
    """Everything that decides an SWE model (recorded in its config.json): stage 1, then PCA and training."""

    # SWE's own default (ASE keeps 10: its vectors are the contexts' mean and nothing more). With 100k words,
    # 7 (128,551 chosen) and 160,000 short sentences: STS mean 73.80 in 38.2 min; 10 (157,355 chosen) and
    # 100,000 short: 73.39 in 36.5 min, 157,355 short: 73.73 in 40.9 min (studies/README.md
    # §vocabulary_curve.py). Short sentences buy STS, more sentences a word mostly word similarity.
    sentences_per_word: int = setting(7, "Occurrences each word should get.")
    pca_sentences: int = setting(100_000, "Sentences for the sentence-level PCA.")
    remove_top: int | None = setting(None, "Top principal components to remove [teacher width / 100].")
    dim: int = setting(256, "Dimensions of the model.")
    kd: KDSettings = setting(factory=KDSettings, help="Stage-3 training.", prefix="kd")
    edit: EditSettings = setting(factory=EditSettings, help="Edited short sentences.", prefix="edit")
    objective: str = setting("kd", "Stage-3 training: kd, contrastive (needs --parallel) or both.")
    parallel: tuple[str, ...] = setting(
        (), "Sentence pairs (left TAB right per line; repeatable) for contrastive training."
    )
    # text read for the distillation targets only: its sentences' teacher embeddings join the chosen
    # sentences' in stage 3a (no word states; e.g. unlabelled text of the domain the model will serve)
    kd_corpus: tuple[str, ...] = setting(
        (),
        "Text file (repeatable) whose sentences are distillation targets only: one teacher pass each for "
        "its sentence embedding, no word states (e.g. unlabelled text of your domain).",
    )
    # words of the KD-only text seen this many times or more and missing from the vocabulary get stage-1
    # vectors from its teacher passes (projected by the PCA step's fit) and join the table KD trains [0: off]
    kd_corpus_words: int = setting(
        0,
        "Words of --kd-corpus seen this many times or more and missing from the vocabulary get vectors "
        "from its teacher passes and are distilled too [0: off].",
    )
    # short corpus sentences (the length of STS pairs and queries) as distillation targets only. Random
    # Wikipedia ones of 5-15 words on the full builds (studies/README.md §"Short sentences at scale"):
    # MiniLM 72.94 -> 73.39 / 73.49 / 73.80 for 80k / 160k / 320k, mpnet 73.19 -> 73.35-73.41. With 100k
    # words, 10 sentences a word (157k chosen): 100k short 73.39, all 157k 73.73; 8 a word (137.5k chosen):
    # 140k short 73.60, 160k 73.86 (studies/README.md §vocabulary_curve.py)
    kd_short: int | None = setting(
        None,
        f"Corpus sentences of {SHORT_WORDS[0]}-{SHORT_WORDS[1]} words (not chosen by stage 1, drawn at "
        f"random) added as distillation targets only: one teacher pass each [default: {SHORT_PER_CHOSEN} "
        f"per sentence stage 1 chose, at most {SHORT_DEFAULT_MAX:,}, where the corpus allows (files, a "
        "distillation step; several languages: each in proportion to its chosen sentences); 0: none].",
    )
    # unknown words: learned rows of the teacher's subword pieces, distilled with the words, or the longest
    # known prefix. The 100k-word build (studies/README.md §retrieval_levers.py, §vocabulary_curve.py),
    # trained at weight 1 and encoding at 1 / 0.75 / 0.5 / 0.25 / 0: SciFact dense 53.9 / 54.9 / 53.8 /
    # 51.5 / 48.3, STS mean 73.26 / 73.58 / 73.73 / 73.76 / 73.74; trained at 0.5: 53.9, 73.50
    fallback: str = setting(
        "pieces",
        "How unknown words get a vector: pieces (the teacher's subword pieces, each a row distilled with "
        "the words) or prefix (the longest known prefix, the models before 2026-11-26).",
    )
    # several languages (where compounds and unspaced scripts lean on pieces): 0.5 -> 1, STS-B dev of the
    # three-language build de 73.93 -> 76.93, en-de 63.39 -> 64.58, en-ja 59.26 -> 59.92, English 79.85 ->
    # 80.45; the twelve-language build's 7 languages with text +0.2 to +2.7 alone, -0.3 (pt) to +0.8 with
    # English (docs/recipes.md, held back)
    piece_weight: float | None = setting(
        None,
        "In the model: an unknown word of k pieces weighs k ** this against a known word's 1 (1: each "
        "piece counts as a word; 0: the word counts once) [default: 0.5 for one language, 1 for several].",
    )
    piece_train_weight: float = setting(
        1.0, "The same weight while the pieces are distilled (the model gets --piece-weight)."
    )
    # the search modes: the 100k-word default encoding its pieces at 0.75 in encode_query and
    # encode_document gets SciFact nDCG@10 54.10 against 52.90 (1.0: 52.80), encode unchanged
    # (studies/README.md §pairs_levers.py)
    search_piece_weight: float | None = setting(
        SEARCH_PIECE_WEIGHT,
        "The pieces' weight of encode_query and encode_document (the search modes; encode keeps "
        "--piece-weight); the models before 2026-11-27 had no modes.",
    )
    # a second table for the search modes, distilled without edit families (methods/swe/search_step.py):
    # three seeds, SciFact nDCG@10 with the search modes 53.42 -> 54.28, encode unchanged
    search_rows: bool | None = setting(
        None,
        "Distil a second table for encode_query and encode_document as a build without edit families "
        "does, kept int8 beside the model's (retrieval keeps what the edits cost it) [default: on where "
        "the build has edit families and no --pairs].",
    )
    stages: tuple[str, ...] = setting(STAGES, "A prefix of extract,pca,kd.", comma=True)
    align: AlignSettings = setting(
        factory=AlignSettings, help="The languages' alignment (several languages).", prefix="align"
    )
    # a last stage: retrieval training on query→passage pairs, this build's teacher targets as the anchor
    # (staticsem.distillation.stages.pairs; `staticsem train-pairs` runs it on any model)
    pairs: tuple[str, ...] = setting(
        (),
        "Query→passage pairs files (query, positive [, negative], tab-separated; repeatable): a last stage "
        "trains on them, this build's teacher targets anchoring similarity; --exclude applies to them.",
    )
    pairs_training: PairsSettings = setting(
        factory=PairsSettings, help="Pairs training (with --pairs).", prefix="pairs"
    )
    keep_analysis: bool = setting(
        False,
        "Also put analysis.safetensors (stage-1 vectors, ABTT components; for `staticsem analyze`) in the "
        "model folder, not only in the work folder.",
    )

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        bad = [s for s in self.stages if s not in STAGES]
        if bad or not self.stages or self.stages != STAGES[: len(self.stages)]:
            raise InputError(f"--stages must be a prefix of {','.join(STAGES)}, got {','.join(self.stages)}")
        for name in ("pca_sentences", "dim"):
            if getattr(self, name) < 1:
                raise InputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        self.align.validate(self.fallback, self.dim)
        self._validate_training()
        super().validate()

    def _validate_training(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if (self.objective == "kd") != (not self.parallel):
            raise InputError(
                "--parallel PAIRS.tsv goes with --objective contrastive or both"
                if self.parallel
                else f"the {self.objective} objective needs --parallel PAIRS.tsv (sentence pairs)"
            )
        for path in self.parallel:
            if not Path(path).is_file():
                raise InputError(f"{path}: parallel pairs file is missing")
        kd = self.kd.resolved(self.edits() > 0)  # as the build will train: unset ones chosen
        kd.validate()
        self.edit.validate(self.draws_short(), len(corpus_languages(self)), kd.groups)
        if kd.pairs_ranked == "families" and not (kd.whole_weight and self.edits()):
            raise InputError("--kd-whole-pairs families needs --kd-whole above 0 and edit families")
        check_search_rows(self)
        if not 0.0 <= kd.groups <= 1.0 or kd.group_size < 2:
            raise InputError(
                f"--kd-groups must be within 0..1 and groups hold 2 or more sentences, got "
                f"{kd.groups} and {kd.group_size}"
            )
        if self.fallback not in FALLBACKS:
            raise InputError(f"fallback must be one of {', '.join(FALLBACKS)}, got {self.fallback!r}")
        for name in ("piece_weight", "piece_train_weight", "search_piece_weight"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) <= 1.0:
                flag = "--" + name.replace("_", "-")
                raise InputError(f"{flag} must be within 0..1, got {getattr(self, name)}")
        if not (self.kd.tau > 0.0 and math.isfinite(self.kd.tau)):
            raise InputError(f"--kd-tau must be positive and finite, got {self.kd.tau}")
        if not 0.0 <= self.kd.average < 1.0:
            raise InputError(f"--kd-average must be within 0..1 (1 excluded), got {self.kd.average}")
        if self.kd_corpus_words < 0 or (self.kd_corpus_words and not self.kd_corpus):
            raise InputError(
                f"--kd-corpus-words takes a count >= 0 and needs --kd-corpus, got {self.kd_corpus_words}"
            )
        asked = self.kd_short or 0
        if asked < 0 or (asked and "-" in self.corpus):
            raise InputError(
                f"--kd-short takes a count >= 0 and a corpus read twice (not -), got {self.kd_short}"
            )
        if (self.kd_corpus or asked) and not self._distils():
            raise InputError(
                "--kd-corpus and --kd-short feed the distillation step: they need --objective kd or both"
            )
        if self.pairs:
            if not self._distils():
                raise InputError("--pairs trains the distilled model: it needs the kd stage and objective")
            self.pairs_training.validate(self.dim)
            check_sources(self.pairs)
        if self.kd_corpus:
            if "-" in self.kd_corpus or EMBEDDED in self.kd_corpus:
                raise InputError("--kd-corpus takes text files (not '-' or 'embedded')")
            check_sources(self.kd_corpus)

    def _distils(self) -> bool:
        return self.objective != "contrastive" and "kd" in self.stages

    def pieces_weight(self) -> float:
        """``--piece-weight``, by default 0.5 in a build of one language and 1 in a build of several."""
        if self.piece_weight is not None:
            return self.piece_weight
        return 1.0 if self.several_languages() else 0.5

    def several_languages(self) -> bool:
        """Whether the corpus names more than one language."""
        return len(corpus_languages(self)) > 1

    def edits(self) -> int:
        """How many short sentences get edited copies (``EditSettings.count``)."""
        return self.edit.count(self.draws_short(), len(corpus_languages(self)))

    def draws_short(self) -> bool:
        """Whether distillation gets short corpus sentences: asked for, or by default where the corpus
        allows it (files) and a distillation step runs."""
        if self.kd_short is not None:
            return self.kd_short > 0
        return "-" not in self.corpus and self._distils()

    def learns_pieces(self) -> bool:
        """Whether the model gets learned subword pieces: asked for, and a training step runs."""
        return self.fallback == "pieces" and "kd" in self.stages

    def short_count(self, chosen: int) -> int:
        """How many short sentences to draw: ``--kd-short``, by default ``SHORT_PER_CHOSEN`` times
        ``chosen`` (stage 1's count) up to ``SHORT_DEFAULT_MAX``."""
        if not self.draws_short():
            return 0
        if self.kd_short is not None:
            return self.kd_short
        return min(round(chosen * SHORT_PER_CHOSEN), SHORT_DEFAULT_MAX)


Settings = TypeVar("Settings", bound=ASESettings)


def with_splitter(settings: Settings) -> Settings:
    """``settings`` with the word splitter chosen when left unset: ``greedy`` (the teacher's pieces, longest
    first) for corpora tagged with a language written without spaces (zh, ja, th...), else ``words``."""
    if settings.splitter is not None:
        return settings
    return replace(settings, splitter="greedy" if needs_subword(corpus_languages(settings)) else "words")


def for_teacher(settings: SWESettings, width: int, layers: int) -> SWESettings:
    """``settings`` with the teacher-dependent ones left unset chosen from the teacher's ``width`` and
    depth: the removed components (width / 100) and, for a wide teacher, its second-to-last layer."""
    from staticsem.distillation.stages.abtt import default_remove_top

    layer = settings.layer
    if layer is None and width >= WIDE_TEACHER and layers > 1:
        layer = -2
    top = default_remove_top(width) if settings.remove_top is None else settings.remove_top
    return replace(settings, layer=layer, remove_top=top)
