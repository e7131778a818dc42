"""Model2Vec-style corpus-free distillation (METHOD.md §3): each word alone through the teacher, PCA, SIF.

Differs from model2vec in that the vocabulary is made of whole words (the teacher's whole-word
tokens, or a user word list), which is what staticsem's word-level inference looks up; unknown
words fall back to their longest known prefix through the teacher's subword tokenizer.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import ChunkStore, fingerprint, work_folder
from staticsem.distillation.corpus.vocabulary import read_word_list
from staticsem.distillation.method import Frame, record
from staticsem.distillation.methods.token.settings import TokenSettings
from staticsem.distillation.teachers.backends import backend_key
from staticsem.distillation.teachers.device import resolve_runtime
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.model import StaticModel
from staticsem.version import BUILD_PACKAGES, environment

logger = logging.getLogger(__name__)


def zipf_weights(count: int, sif: float) -> np.ndarray:
    """SIF weights sif / (sif + p(rank)) under a Zipf law over ``count`` frequency-ordered words."""
    inverse_rank = 1.0 / np.arange(2, count + 2)
    return (sif / (sif + inverse_rank / inverse_rank.sum())).astype(np.float32)


def reduce_dims(matrix: np.ndarray, dim: int, seed: int) -> np.ndarray:
    """PCA to ``dim`` components (capped by the matrix's rank); rows stay uncentred in scale."""
    dim = min(dim, matrix.shape[1], matrix.shape[0])
    return (
        PCA(n_components=dim, svd_solver="full", random_state=seed).fit_transform(matrix).astype(np.float32)
    )


def distill_token(
    teacher: Teacher,
    words: list[str],
    *,
    dim: int = 256,
    sif: float | None = 1e-4,
    batch_size: int = 256,
    work_dir: Path | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> StaticModel:
    """Distil ``words`` (most frequent first, for the SIF weights) into a ``StaticModel``."""
    order = sorted(range(len(words)), key=lambda i: len(words[i]))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    store = None
    if work_dir is not None:
        settings = {"method": "token", "teacher": teacher.id, "batch": batch_size}
        key = fingerprint(
            {**settings, **backend_key(teacher.backend, getattr(teacher, "precision", "fp32"))}, words
        )
        store = ChunkStore(work_dir / "token-states", key)
    raw = np.zeros((len(words), teacher.hidden_size), dtype=np.float32)
    for index, chunk in enumerate(
        tqdm(chunks, desc="teacher passes", unit="batch", disable=not show_progress)
    ):

        def make(chunk: list[int] = chunk) -> dict[str, np.ndarray]:
            return {"states": teacher.embed_alone([words[i] for i in chunk])}

        raw[chunk] = (store.compute(index, make) if store is not None else make())["states"]
    vectors = reduce_dims(raw, dim, seed)
    if sif is not None:
        vectors *= zipf_weights(len(words), sif)[:, None]
    metadata = {
        "method": "token",
        "teacher": teacher.id,
        "teacher_dim": int(raw.shape[1]),
        "settings": {
            "dim": int(vectors.shape[1]),
            "sif": sif,
            "seed": seed,
            "words": len(words),
            "teacher_backend": teacher.backend,
            "teacher_precision": getattr(teacher, "precision", "fp32"),
        },
        "environment": environment(BUILD_PACKAGES),  # the teacher's numerics and the PCA
    }
    return StaticModel(words, vectors, tokenizer=teacher.subword_tokenizer, metadata=metadata)


def run_token(settings: TokenSettings, frame: Frame) -> StaticModel:
    """The token method's run: the teacher's whole-word tokens (or a word list) through ``distill_token``."""
    started, s = time.perf_counter(), settings
    words = read_word_list(Path(s.vocabulary), s.vocab_size) if s.vocabulary is not None else None
    work_dir = None if frame.out is None else work_folder(frame.out)  # removed once the model is saved
    runtime = resolve_runtime(frame.device, s.teacher_backend, s.teacher_precision)
    teacher = Teacher(
        s.teacher,
        trust_remote_code=frame.trust_remote_code,
        backend=runtime.backend,
        cache=None if work_dir is None else work_dir / "onnx",
        device=runtime.device,
        precision=runtime.precision,
        fallback=runtime.fallback,
    )
    runtime = runtime.ran(teacher.backend, teacher.precision)  # torch, where ONNX cannot export the teacher
    s = replace(s, teacher_backend=runtime.backend, teacher_precision=runtime.precision)
    if words is None:
        words = teacher.vocabulary_tokens()[: s.vocab_size]
    model = distill_token(
        teacher,
        words,
        dim=s.dim,
        sif=s.sif or None,
        batch_size=s.batch_size,
        work_dir=work_dir,
        seed=s.seed,
        show_progress=frame.show_progress,
    )
    derived = {**model.metadata["settings"], "vocabulary": s.vocabulary or "teacher tokens"}
    model.metadata["settings"] = record(s, **derived)
    model.metadata["seconds"] = round(time.perf_counter() - started, 1)
    model.metadata["runtime"] = {"device": runtime.describe()}
    if frame.out is not None:
        model.save(frame.out, dtype=frame.dtype)
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)
    return model
