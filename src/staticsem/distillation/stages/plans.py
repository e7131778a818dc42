"""Batch plans: which of a teacher's texts it reads together, sorted by the teacher's token count so that a
batch pads little: ``batch_size`` texts on the CPU, a token budget on a GPU (characters left 1.43× the real
tokens padded on Wikipedia's sentences, token counts 1.00×). Stage 1, the short sentences' targets, X2Static's
contexts, eval's teacher encoder and the Ray shards all read by these plans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from staticsem.distillation.checkpoint import fingerprint


def length_batches(
    sentences: Sequence[str], batch_size: int, lengths: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sentence indices in batches of ``batch_size`` sorted by ``lengths`` (the teacher's token counts; by
    default the sentences' characters): less padding."""
    if lengths is None:
        lengths = np.array([len(s) for s in sentences], np.int64)
    order = np.argsort(lengths, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def token_batches(tokens: np.ndarray, budget: int) -> list[np.ndarray]:
    """Sentence indices sorted by token count, cut so that each batch's padded size (sentences × its longest)
    stays within ``budget`` tokens (a longer sentence goes alone)."""
    order = np.argsort(tokens, kind="stable")
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end + 1 - start) * int(tokens[order[end]]) > budget:
            batches.append(order[start:end])
            start = end
    return batches


def plan_batches(
    teacher: Any, sentences: Sequence[str], batch_size: int, batch_tokens: int | None = None
) -> list[np.ndarray]:
    """The batches ``teacher`` reads ``sentences`` in: ``batch_size`` sentences sorted by the teacher's token
    count on the CPU (by characters for a teacher that cannot count); on a GPU (``batch_tokens`` given) a
    token budget. Characters left 1.43× the tokens padded on Wikipedia's sentences, token counts 1.00×."""
    counts = getattr(teacher, "token_counts", None)
    if counts is None:
        return length_batches(sentences, batch_size)
    if batch_tokens is None:
        return length_batches(sentences, batch_size, counts(sentences))
    return token_batches(counts(sentences), batch_tokens)


def plan_key(plan: Sequence[np.ndarray]) -> str:
    """A short hash of a batch plan: its whole order and its cut into batches (a saved partial is resumed
    only under the same plan)."""
    sizes = [str(len(batch)) for batch in plan]
    order = np.concatenate(plan).astype(np.int64) if plan else np.zeros(0, np.int64)
    return fingerprint({"order": hashlib.sha256(order.tobytes()).hexdigest(), "n": len(order)}, sizes)
