"""Pieces of an index that stand alone: hits, search modes, the model's identity, batching, progress."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from enum import Enum
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import MissingExtra
from staticsem.model import StaticModel


class SearchMode(str, Enum):
    DENSE = "dense"
    BM25 = "bm25"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class Hit:
    """One search result; ``score`` is higher for better hits (cosine, negated BM25, or fused)."""

    id: str
    score: float
    text: str
    metadata: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_sha256(model: StaticModel) -> str:
    """SHA-256 of what decides a model's vectors: vocabulary, matrix, int8 scales."""
    digest = hashlib.sha256()
    digest.update("\n".join(model.vocab).encode())
    digest.update(str(model.vectors.dtype).encode() + np.ascontiguousarray(model.vectors).tobytes())
    if model.scales is not None:
        digest.update(model.scales.tobytes())
    return digest.hexdigest()


def require_engines() -> None:
    """Raise ``MissingExtra`` (an ``ImportError``) naming the ``search`` extra when usearch or tantivy is
    missing, before anything is read or written."""
    missing = [name for name in ("usearch", "tantivy") if find_spec(name) is None]
    if missing:
        raise MissingExtra(f"search indexes need {' and '.join(missing)}: pip install 'staticsem[search]'")


def resolve_model(model: StaticModel | str | Path) -> tuple[StaticModel, str | None]:
    if isinstance(model, StaticModel):
        source = model.metadata.get("source")
        return model, str(Path(source).resolve()) if source else None
    from staticsem.io import load
    from staticsem.io.hub import resolve

    path = resolve(model)  # a hub name: its folder in the hub's cache, which the index records
    return load(path), str(path.resolve())


def batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


@contextlib.contextmanager
def progress(enabled: bool) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``: a rich counter of indexed documents when enabled."""
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("indexed {task.completed:,} documents"), TimeElapsedColumn())
    with Progress(*columns) as bar:
        task = bar.add_task("indexing", total=None)
        yield lambda n: bar.advance(task, n)
