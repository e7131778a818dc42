"""A deterministic fake teacher for fast pipeline tests (importable from subprocesses too)."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
from tokenizers import Tokenizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from staticsem.distillation.teacher import TeacherBatch


def word_vector(word: str, width: int) -> np.ndarray:
    """A fixed random vector per lower-cased word."""
    seed = int(hashlib.sha256(word.lower().encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(size=width).astype(np.float32)


class FakeTeacher:
    """Each token's state is its word's vector plus a little sentence context; pooling is the mean.

    ``fail_after`` raises KeyboardInterrupt before that many more batches; ``sleep_after`` sleeps a long
    time instead (so a test can kill the process with SIGKILL mid-run).
    """

    id = "fake-teacher"
    hidden_size = 16
    lowercases = True

    def __init__(
        self, tokenizer: Tokenizer, fail_after: int | None = None, sleep_after: int | None = None
    ) -> None:
        self.subword_tokenizer = tokenizer
        self.fail_after, self.sleep_after = fail_after, sleep_after
        self.batches = 0
        self.sentences = 0

    def forward(self, texts: list[str]) -> TeacherBatch:
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise KeyboardInterrupt
        if self.sleep_after is not None and self.batches >= self.sleep_after:
            time.sleep(600)
        self.batches += 1
        self.sentences += len(texts)
        pieces = [BertPreTokenizer().pre_tokenize_str(t) for t in texts]
        width = max(len(p) for p in pieces) + 2
        states = torch.zeros(len(texts), width, self.hidden_size)
        own = torch.zeros(len(texts), width, dtype=torch.bool)
        offsets = torch.zeros(len(texts), width, 2, dtype=torch.int64)
        for b, tokens in enumerate(pieces):
            vectors = (
                np.stack([word_vector(w, self.hidden_size) for w, _ in tokens])
                if tokens
                else np.zeros((0, 16))
            )
            context = vectors.mean(axis=0) if len(vectors) else 0.0
            for i, (_, span) in enumerate(tokens):
                states[b, i + 1] = torch.from_numpy(vectors[i] + 0.3 * context)
                own[b, i + 1] = True
                offsets[b, i + 1] = torch.tensor(span)
        mean = (states * own[..., None]).sum(1) / own.sum(1, keepdim=True).clamp(min=1)
        return TeacherBatch(states, own, offsets, torch.nn.functional.normalize(mean, dim=-1))
