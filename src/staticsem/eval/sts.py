"""Semantic textual similarity: Spearman ×100 of cosine vs gold, pooled over each whole file (as MTEB).

Three tasks read ``score<TAB>sentence1<TAB>sentence2`` files: ``sts`` (``sts/``: English, or the language
in a file's name), ``msts`` (monolingual STS in many languages: ``multilingual/sts/stsb-LANG-*.tsv``) and
``xsts`` (cross-lingual: ``xsts/``, and ``multilingual/sts/stsb-en-LANG-*.tsv``). Each set's language comes
from its file name (``eval.languages``); ``languages=`` keeps the sets of some languages.

One difference from MTEB: a text with no known word (a zero row) has cosine 0 with anything here,
while MTEB's ``1 - sklearn.paired_cosine_distances`` gives it 0.5.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from staticsem.errors import InputError
from staticsem.eval.base import Encoder, Evaluator, embed, find_file, spearman100, with_mean
from staticsem.eval.languages import ENGLISH, codes, language_of, select

STS_DIRS = ("sts",)
MULTILINGUAL_STS = "multilingual/sts"
ORDER = ("stsb-dev.tsv", "sickr-trial.tsv", "stsb-train.tsv", "sickr-train.tsv")
Take = Callable[[str], bool]  # which file stems of a folder a task reads


def _every(stem: str) -> bool:
    return True


def _one_language(stem: str) -> bool:
    return len(codes(stem)) == 1


def _two_languages(stem: str) -> bool:
    return len(codes(stem)) >= 2


class STS(Evaluator):
    """Cosine similarity of the two sentences' embeddings against the gold score.

    :param data_dir: the data folder (or its ``sts/`` folder) holding ``score<TAB>sentence1<TAB>sentence2``.
    :param files: file names, looked up in ``data_dir`` and ``data_dir/sts``; default every ``*.tsv``
        there (STS-B dev, SICK-R trial, STS-B train, SICK-R train first).
    :param languages: keep only the sets of these languages (ISO 639-1 codes); ``None`` keeps all.
    :returns: ``{stem: spearman, "mean": mean over files}`` (e.g. ``{"stsb-dev": 82.1, ...}``).
    :raises InputError: for missing or malformed files, or no set in ``languages``.
    """

    name = "sts"
    dirs: tuple[str, ...] = STS_DIRS
    # (folder, which stems) read together; without any, the ``fallback`` stems of ``data_dir`` itself
    sources: tuple[tuple[str, Take], ...] = (("sts", _every),)
    fallback: Take = staticmethod(_every)
    default_language: str | None = ENGLISH  # the language of a set whose name has no code

    def __init__(
        self, data_dir: str | Path, files: Sequence[str] | None = None, languages: Sequence[str] | None = None
    ) -> None:
        super().__init__()
        if files is None:
            paths = self._discover(Path(data_dir))
        else:
            paths = [find_file(data_dir, name, self.dirs) for name in files]
        if languages is not None:
            paths = select(paths, languages, self.default_language, self.name)
        self.pairs = self._read_pairs(data_dir, [str(p.resolve()) for p in paths], self.dirs, score_column=0)
        self.datasets = list(self.pairs)
        self.languages = {
            stem: language
            for stem in self.datasets
            if (language := language_of(stem, self.default_language)) is not None
        }
        self.settings = {"similarity": "cosine", "correlation": "spearman, one per file"}

    def _discover(self, root: Path) -> list[Path]:
        """The files of every source folder (STS-B dev, SICK-R trial, ... first within each)."""
        found: list[Path] = []
        for sub, take in self.sources:
            paths = sorted(path for path in (root / sub).glob("*.tsv") if take(path.stem))
            found += sorted(paths, key=lambda p: ORDER.index(p.name) if p.name in ORDER else len(ORDER))
        if not found:
            found = sorted(path for path in root.glob("*.tsv") if self.fallback(path.stem))
        if not found:
            folders = ", ".join(dict.fromkeys(sub for sub, _ in self.sources))
            raise InputError(f"no *.tsv files of {self.name} in {root} or its {folders} folders")
        return found

    def sentences(self) -> list[str]:
        """Every distinct sentence of the task, in file order."""
        return list(dict.fromkeys(s for first, second, _ in self.pairs.values() for s in (*first, *second)))

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        texts = self.sentences()
        vectors = embed(encoder, texts)
        row = {t: i for i, t in enumerate(texts)}
        metrics: dict[str, float] = {}
        for stem, (first, second, gold) in self.pairs.items():
            a = vectors[[row[t] for t in first]]
            b = vectors[[row[t] for t in second]]
            metrics[stem] = spearman100(gold, np.einsum("ij,ij->i", a, b))
        return with_mean(metrics, self.datasets)


class MultilingualSTS(STS):
    """Monolingual STS in each language: ``multilingual/sts/stsb-LANG-*.tsv`` (one language code in the
    name, e.g. STS-B dev machine-translated); the mean is over the languages' sets."""

    name = "msts"
    dirs = (MULTILINGUAL_STS,)
    sources = ((MULTILINGUAL_STS, _one_language),)
    fallback = staticmethod(_one_language)
    default_language = None


class CrossLingualSTS(STS):
    """STS whose two sentences are in different languages: every file of ``xsts/`` (``score<TAB>en<TAB>de``)
    and the ``multilingual/sts/`` files naming two languages (``stsb-en-de-dev.tsv``: English first)."""

    name = "xsts"
    dirs = ("xsts", MULTILINGUAL_STS)
    sources = (("xsts", _every), (MULTILINGUAL_STS, _two_languages))
    fallback = staticmethod(_two_languages)
    default_language = None
