"""Classic baselines trained on the corpus with gensim: word2vec (CBOW / skip-gram) and fastText.

No teacher: the vectors come from the corpus alone, as reference points for the distilled methods.
Sentences are read with ``iter_sentences`` and split into words exactly as the runtime splits text
(``sentence_words``), so the vocabulary matches what ``StaticModel.encode`` looks up. gensim reads the
corpus once to count words and once per epoch; stdin (``-``) can be read only once, so a corpus that
includes it is kept in memory (as sentence strings) for the whole training.

fastText models keep their n-gram bucket table (``wv.vectors_ngrams``): at inference an unknown word
gets the mean of its n-gram vectors, like gensim's ``wv[word]`` (see ``staticsem.ngrams``).

gensim trains in one go: an interrupted run cannot resume (that would need gensim's pickles, which
staticsem never writes); rerunning retrains from scratch. Runs are reproducible with ``workers=1`` and a
fixed ``seed`` (more threads interleave their updates in an arbitrary order).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from enum import Enum
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from staticsem.distillation.corpus.reading import CorpusOptions, check_sources, fingerprint_sources
from staticsem.distillation.corpus.streams import Sentences, sentence_source
from staticsem.distillation.method import Frame, record
from staticsem.distillation.methods.classic.settings import FastTextSettings, Word2VecSettings
from staticsem.errors import InputError, parse_choice
from staticsem.model import StaticModel
from staticsem.ngrams import NgramTable
from staticsem.version import environment

# what decides a trained model beside its settings and corpus: gensim's trainer and its arithmetic
PACKAGES = ("numpy", "scipy", "gensim")

if TYPE_CHECKING:
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

logger = logging.getLogger(__name__)


class Algorithm(str, Enum):
    """Which gensim model ``distill_classic`` trains."""

    WORD2VEC = "word2vec"
    FASTTEXT = "fasttext"


def stable_hash(text: str) -> int:
    """Hash for gensim's ``hashfxn`` that, unlike ``hash``, does not depend on PYTHONHASHSEED."""
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
    )


def _check_settings(settings: dict[str, Any]) -> None:
    """Raise ``InputError`` for the first setting gensim cannot use (fastText's only when training it)."""
    positive = (
        "dim",
        "window",
        "negative",
        "epochs",
        "workers",
        "min_count",
        "vocab_size",
        "minn",
        "buckets",
    )
    bad = next((k for k in positive if settings.get(k) is not None and settings[k] < 1), None)
    if bad is not None:
        raise InputError(f"{bad} must be at least 1, got {settings[bad]}")
    if "minn" in settings and settings["minn"] > settings["maxn"]:
        raise InputError(f"minn ({settings['minn']}) must not exceed maxn ({settings['maxn']})")
    if not 0 <= settings["sample"] < 1:
        raise InputError(f"sample must be in [0, 1), got {settings['sample']}")


def _progress_callback(model_name: str, epochs: int, bar: tqdm[Any], loss: bool) -> CallbackAny2Vec:
    """A gensim callback logging each epoch's time (and word2vec's loss) and labelling the progress bar."""
    from gensim.models.callbacks import CallbackAny2Vec

    class EpochLog(CallbackAny2Vec):  # type: ignore[misc]
        def __init__(self) -> None:
            self.epoch, self.started, self.previous_loss = 0, 0.0, 0.0

        def on_epoch_begin(self, model: Word2Vec) -> None:
            self.started = time.perf_counter()
            bar.set_description(f"{model_name} epoch {self.epoch + 1}/{epochs}")

        def on_epoch_end(self, model: Word2Vec) -> None:
            self.epoch += 1
            seconds = time.perf_counter() - self.started
            if loss:
                total = float(model.get_latest_training_loss())  # cumulative over the train() call
                epoch_loss, self.previous_loss = total - self.previous_loss, total
                bar.set_postfix(loss=f"{epoch_loss:.4g}")
                logger.info(
                    "%s epoch %d/%d: loss %.6g, %.1f s", model_name, self.epoch, epochs, epoch_loss, seconds
                )
            else:
                logger.info("%s epoch %d/%d: %.1f s", model_name, self.epoch, epochs, seconds)

    return EpochLog()


def distill_classic(
    corpus: Sequence[str],
    *,
    algorithm: str,
    sg: bool = False,
    dim: int = 256,
    vocab_size: int | None = 50_000,
    min_count: int = 5,
    window: int = 5,
    negative: int = 5,
    sample: float = 1e-3,
    epochs: int = 5,
    minn: int = 3,
    maxn: int = 6,
    buckets: int = 200_000,
    workers: int = 2,
    seed: int = 0,
    lowercase: bool = True,
    options: CorpusOptions | None = None,
    show_progress: bool = True,
) -> StaticModel:
    """Train word2vec or fastText with gensim on ``corpus`` and return it as a ``StaticModel``.

    :param corpus: corpus sources for ``iter_sentences`` (files, ``-`` for stdin, ``embedded``).
    :param algorithm: ``word2vec`` or ``fasttext``; ``sg`` picks skip-gram instead of CBOW.
    :param vocab_size: gensim's ``max_final_vocab`` (it raises min_count until the vocabulary fits, so it
        can end smaller); rows keep gensim's order, most frequent first.
    :param minn: shortest character n-gram (fastText); ``maxn`` the longest, ``buckets`` the table size.
    :param workers: gensim threads; only ``workers=1`` gives the same vectors for the same ``seed``.
    :raises InputError: for bad settings, an unusable corpus, or no word reaching ``min_count``.

    A corpus with stdin (``-``) is kept in memory, as gensim reads the corpus once per epoch. Training
    cannot resume after an interruption (gensim would need its pickles): a rerun retrains from scratch.
    """
    settings: dict[str, Any] = {
        "algorithm": parse_choice(Algorithm, algorithm, "algorithm").value,
        "sg": bool(sg),
        "dim": dim,
        "vocab_size": vocab_size,
        "min_count": min_count,
        "window": window,
        "negative": negative,
        "sample": sample,
        "epochs": epochs,
        "minn": minn,
        "maxn": maxn,
        "buckets": buckets,
        "workers": workers,
        "seed": seed,
        "lowercase": lowercase,
    }
    fasttext = settings["algorithm"] == Algorithm.FASTTEXT.value
    if not fasttext:
        del settings["minn"], settings["maxn"], settings["buckets"]
    _check_settings(settings)
    started = time.perf_counter()
    options = options or CorpusOptions()
    check_sources(corpus)
    sentences = Sentences(sentence_source(corpus, options), lowercase)
    if next(iter(sentences.read()), None) is None:
        raise InputError("the corpus holds no usable sentence (empty, or no line within the word limits)")
    model = _train(sentences, settings, fasttext, show_progress)
    wv = model.wv
    ngrams = None
    if fasttext:
        ngrams = NgramTable(wv.vectors_ngrams.astype("float32"), minn, maxn, lowercase=lowercase)
    import gensim

    metadata = {
        "method": settings["algorithm"],
        "trainer": f"gensim {gensim.__version__}",
        "settings": {**settings, "corpus_options": options.key()},
        "corpus": fingerprint_sources(corpus),
        "sentences": int(model.corpus_count),
        "vocabulary": len(wv),
        "seconds": round(time.perf_counter() - started, 1),
        "environment": environment(PACKAGES),
    }
    return StaticModel(list(wv.index_to_key), wv.vectors.astype("float32"), ngrams=ngrams, metadata=metadata)


def _train(sentences: Sentences, settings: dict[str, Any], fasttext: bool, show_progress: bool) -> Word2Vec:
    """Build gensim's vocabulary, then train; the model is never saved by gensim."""
    from gensim.models import FastText, Word2Vec

    common = {
        "vector_size": settings["dim"],
        "sg": int(settings["sg"]),
        "window": settings["window"],
        "min_count": settings["min_count"],
        "max_final_vocab": settings["vocab_size"],
        "negative": settings["negative"],
        "hs": 0,
        "sample": settings["sample"],
        "epochs": settings["epochs"],
        "workers": settings["workers"],
        "seed": settings["seed"],
        "hashfxn": stable_hash,
    }
    model: Word2Vec
    if fasttext:
        model = FastText(**common, min_n=settings["minn"], max_n=settings["maxn"], bucket=settings["buckets"])
    else:
        model = Word2Vec(**common, compute_loss=True)
    name = "fastText" if fasttext else "word2vec"
    with tqdm(desc="counting words", unit=" sent", disable=not show_progress, mininterval=1) as bar:
        sentences.progress = bar
        model.build_vocab(sentences)
    if len(model.wv) == 0:
        raise InputError(
            f"no word occurs min_count={settings['min_count']} times in the corpus's "
            f"{model.corpus_count} sentences; lower min_count or give more text"
        )
    epochs = settings["epochs"]
    total = model.corpus_count * epochs
    with tqdm(total=total, desc=name, unit=" sent", disable=not show_progress, mininterval=1) as bar:
        sentences.progress = bar
        callback = _progress_callback(name, epochs, bar, loss=not fasttext)
        model.train(
            sentences,
            total_examples=model.corpus_count,
            epochs=epochs,
            callbacks=[callback],
            compute_loss=not fasttext,
        )
    sentences.progress = None
    logger.info("%s: %d words, %d sentences", name, len(model.wv), model.corpus_count)
    return model


def run_word2vec(settings: Word2VecSettings, frame: Frame) -> StaticModel:
    """The word2vec method's run."""
    return _run_gensim(settings, frame, Algorithm.WORD2VEC)


def run_fasttext(settings: FastTextSettings, frame: Frame) -> StaticModel:
    """The fasttext method's run."""
    return _run_gensim(settings, frame, Algorithm.FASTTEXT)


def _run_gensim(settings: Word2VecSettings, frame: Frame, algorithm: Algorithm) -> StaticModel:
    options = asdict(settings)
    corpus = options.pop("corpus")
    reading = CorpusOptions(
        max_words=options.pop("max_words"),
        max_sentences=options.pop("max_sentences"),
        exclude=tuple(options.pop("exclude")),
    )
    model = distill_classic(
        corpus, algorithm=algorithm.value, options=reading, show_progress=frame.show_progress, **options
    )
    model.metadata["settings"] = record(settings, **model.metadata["settings"])
    if frame.out is not None:
        model.save(frame.out, dtype=frame.dtype)
    return model
