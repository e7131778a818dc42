"""Hard negatives for pairs training, mined with the project's BM25 (``staticsem.search.lexical``, tantivy).

The distinct documents (positives) are indexed once; each query's negative is drawn at random from its top
``depth`` BM25 hits that are not a positive of that query (any pair with the same query text), nor the same
text. A query whose hits hold no such document gets a random other document. The draw is seeded.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

WRITE_HEAP_THREADS = 1


def mine_negatives(
    queries: Sequence[str],
    positives: Sequence[int] | np.ndarray,
    documents: Sequence[str],
    depth: int = 10,
    seed: int = 0,
    show_progress: bool = True,
) -> np.ndarray:
    """For each query, the index into ``documents`` of one hard negative.

    ``positives[i]`` is the index of query i's positive in ``documents`` (distinct texts).
    """
    from staticsem.search.lexical import LexicalIndex

    rng = np.random.default_rng(seed)
    own: dict[str, set[int]] = defaultdict(set)
    for query, positive in zip(queries, positives, strict=True):
        own[query].add(int(positive))
    negatives = np.empty(len(queries), np.int64)
    with tempfile.TemporaryDirectory(prefix="staticsem-mining-") as folder:
        lexical = LexicalIndex(Path(folder), create=True)
        writer = lexical.writer(WRITE_HEAP_THREADS)
        for key, text in enumerate(tqdm(documents, desc="indexing documents", disable=not show_progress)):
            writer.add(key, text, ())
        writer.commit()
        writer.close()
        for i, query in enumerate(tqdm(queries, desc="mining negatives", disable=not show_progress)):
            taken = own[query]
            hits = [key for key, _ in lexical.search(query, depth + len(taken)) if key not in taken]
            negatives[i] = (
                hits[int(rng.integers(min(depth, len(hits))))] if hits else _other(rng, taken, len(documents))
            )
    return negatives


def _other(rng: np.random.Generator, taken: set[int], size: int) -> int:
    """A random document index outside ``taken`` (``taken`` is never every document in practice)."""
    while True:
        pick = int(rng.integers(size))
        if pick not in taken or len(taken) >= size:
            return pick
