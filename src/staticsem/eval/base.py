"""The evaluator contract: an ``Encoder`` protocol, an ``Evaluator`` base and the helpers tasks share.

Every task is a callable object built from a data folder: ``task(encoder) -> {metric: value}``. The same
code measures staticsem models, model2vec models and Sentence Transformers, because all it asks of them is
``encode(list[str]) -> array``. Scores are ×100 (Spearman, accuracy, nDCG, V-measure), and each task keeps
the exact files it read (path, row count, SHA-256) so a report says what was measured.
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from staticsem.errors import InputError, MissingExtra, StaticsemError
from staticsem.modes import encoder_for

logger = logging.getLogger(__name__)
MEAN = "mean"


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns texts into one row each (staticsem, model2vec, Sentence Transformers)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        """One embedding row per text."""
        ...


class NotApplicable(StaticsemError):
    """The task cannot measure this encoder (e.g. analogies need word vectors)."""


def require(*modules: str) -> None:
    """Check that ``modules`` can be imported.

    :raises MissingExtra: naming the missing ones and the install line.
    """
    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        raise MissingExtra(f"this needs {', '.join(missing)}: pip install 'staticsem[eval]'")


@dataclass(frozen=True)
class DataFile:
    """One file a task read: where it is, how many rows it gave and its SHA-256."""

    path: str
    rows: int
    sha256: str

    @classmethod
    def of(cls, path: Path, rows: int) -> DataFile:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return cls(str(path), rows, digest.hexdigest())


class Evaluator(ABC):
    """One task. ``__call__(encoder)`` returns metrics; ``primary_metric`` names the one to rank by.

    Subclasses read their data in ``__init__`` (so a missing file fails before any model runs) and
    record what they read with ``self._record``.
    """

    name: str = "task"
    primary_metric: str = MEAN

    def __init__(self) -> None:
        self.files: list[DataFile] = []
        self.settings: dict[str, Any] = {}
        self.datasets: list[str] = []  # the keys of the per-dataset primary numbers
        self.languages: dict[str, str] = {}  # dataset → its language (eval.languages), where known

    @abstractmethod
    def __call__(self, encoder: Encoder) -> dict[str, float]:
        """Measure ``encoder``; every value is a plain float."""

    def _read_pairs(
        self, data_dir: str | Path, files: Sequence[str], subdirs: Sequence[str], score_column: int
    ) -> dict[str, tuple[list[str], list[str], np.ndarray]]:
        """Scored pairs of each three-column TSV file (score in ``score_column``), keyed by file stem."""
        first, second = (c for c in range(3) if c != score_column)
        pairs: dict[str, tuple[list[str], list[str], np.ndarray]] = {}
        for name in files:
            path = find_file(data_dir, name, subdirs)
            rows = read_tsv(path, 3)
            gold = np.array([parse_float(r[score_column], path, i) for i, r in enumerate(rows, 1)])
            pairs[path.stem] = ([r[first] for r in rows], [r[second] for r in rows], gold)
            self._record(path, len(rows))
        return pairs

    def _record(self, path: Path, rows: int) -> None:
        self.files.append(DataFile.of(path, rows))

    def describe(self) -> dict[str, Any]:
        """What the task is and exactly which data it read (for reports)."""
        return {
            "primary_metric": self.primary_metric,
            "datasets": self.datasets,
            **({"languages": self.languages} if self.languages else {}),
            "settings": self.settings,
            "files": [asdict(f) for f in self.files],
        }


def find_file(data_dir: str | Path, name: str, subdirs: Sequence[str]) -> Path:
    """``name`` inside ``data_dir`` itself or one of its task ``subdirs`` (first match).

    So ``STS("/data")`` and ``STS("/data/sts")`` both find ``stsb-dev.tsv``.

    :raises InputError: naming every place looked in.
    """
    root = Path(data_dir)
    candidates = [root / name, *(root / sub / name for sub in subdirs)]
    for path in candidates:
        if path.is_file():
            return path
    raise InputError(f"data file {name!r} not found; looked in {', '.join(str(p) for p in candidates)}")


def find_dir(data_dir: str | Path, subdirs: Sequence[str], pattern: str = "*.tsv") -> Path:
    """The first of ``data_dir/sub`` (or ``data_dir`` itself, last) holding files matching ``pattern``."""
    root = Path(data_dir)
    for folder in [*(root / sub for sub in subdirs), root]:
        if folder.is_dir() and any(folder.glob(pattern)):
            return folder
    raise InputError(f"no {pattern} files in {root} or its {', '.join(subdirs)} folders")


def read_tsv(path: Path, columns: int) -> list[list[str]]:
    """Rows of a UTF-8 TSV with exactly ``columns`` fields (blank lines skipped).

    :raises InputError: on a row with another number of fields, with the file and line number.
    """
    rows: list[list[str]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise InputError(f"{path}:{number}: expected {columns} tab-separated fields, got {len(fields)}")
        rows.append(fields)
    if not rows:
        raise InputError(f"{path}: no rows")
    return rows


def parse_float(value: str, path: Path, row: int) -> float:
    """A float from a data file, with the file and row in the error."""
    try:
        return float(value)
    except ValueError:
        raise InputError(f"{path}: row {row}: {value!r} is not a number") from None


def embed(encoder: Encoder, texts: Sequence[str], mode: str | None = None) -> np.ndarray:
    """Encode ``texts`` once each (duplicates share a row), as float32 L2-normalised rows.

    Zero rows (texts with no known word) stay zero, so their cosine with anything is 0. ``mode``: encode as
    ``query`` or ``document`` (``encode_query`` / ``encode_document`` where the encoder has them).

    :raises InputError: when the encoder returns the wrong number of rows.
    """
    unique = list(dict.fromkeys(texts))
    vectors = np.asarray(encoder_for(encoder, mode)(unique), dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(unique):
        raise InputError(f"encoder returned shape {vectors.shape} for {len(unique)} texts")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.maximum(norms, np.finfo(np.float32).tiny)
    if len(unique) == len(texts):
        return vectors
    row = {text: i for i, text in enumerate(unique)}
    return vectors[[row[t] for t in texts]]


def spearman100(gold: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray) -> float:
    """Spearman correlation ×100 (0.0 when either side is constant)."""
    from scipy.stats import spearmanr

    gold, predicted = np.asarray(gold, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    if len(gold) < 2 or np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return 0.0
    return float(spearmanr(gold, predicted).statistic) * 100


def with_mean(metrics: dict[str, float], keys: Sequence[str]) -> dict[str, float]:
    """``metrics`` plus ``mean`` over ``keys`` (the per-dataset primary numbers)."""
    values = [metrics[k] for k in keys if k in metrics]
    return {**metrics, MEAN: float(np.mean(values)) if values else float("nan")}
