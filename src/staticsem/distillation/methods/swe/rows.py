"""Rows an SWE model gains beside stage 1's words: the subword pieces (each alone through the teacher,
resumable in chunks) and the KD-only text's new words, both through the PCA step's fit; and the
stage-1 analysis file ``staticsem analyze`` reads."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import ANALYSIS_FILE, ChunkStore
from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE
from staticsem.distillation.stages.extract import alone_states
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.errors import InputError
from staticsem.io import load
from staticsem.io.atomic import atomic_file, save_tensors
from staticsem.model import StaticModel
from staticsem.modes import both_modes_with
from staticsem.pieces import PieceTable

PIECES_FILE = "pieces.safetensors"
PIECE_BATCH = 256  # pieces per teacher pass (each alone: a few tokens)
PIECE_CHUNK = 8192  # pieces per saved chunk (an interrupted pieces step resumes from the last one)


def piece_text(token: str) -> str:
    """What the teacher reads for one of its subword pieces: without WordPiece's ``##`` or SentencePiece's
    ``▁`` word mark (``#`` for a piece that is only the mark)."""
    return token.removeprefix("##").removeprefix("\u2581") or "#"


def piece_states(teacher: Teacher, folder: Path, key: str, layer: int | None, progress: bool) -> int:
    """Each subword piece of ``teacher``'s tokenizer alone through it: the mean of its tokens' states at
    ``layer``, saved to ``folder/PIECES_FILE``; chunks finished under ``key`` are reused. Returns how many."""
    tokenizer = teacher.subword_tokenizer
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    texts = [piece_text(tokenizer.id_to_token(i) or "") for i in range(size)]
    store = ChunkStore(folder / "pieces-chunks", key)
    chunks = [texts[start : start + PIECE_CHUNK] for start in range(0, size, PIECE_CHUNK)]
    states = [
        store.compute(i, _alone(teacher, chunk, layer))
        for i, chunk in enumerate(tqdm(chunks, "pieces", unit="chunk", disable=not progress))
    ]
    save_tensors(folder / PIECES_FILE, {"states": np.concatenate([s["states"] for s in states])})
    shutil.rmtree(store.folder)
    return size


def _alone(teacher: Teacher, texts: list[str], layer: int | None) -> Callable[[], dict[str, np.ndarray]]:
    """A chunk's job: the states of ``texts``, each alone."""
    return lambda: {"states": alone_states(teacher, texts, PIECE_BATCH, layer)}


def with_pieces(stage2: StaticModel, folder: Path, weight: float) -> StaticModel:
    """``stage2`` with the pieces' starting rows (their states through the PCA step's fit in ``folder``)."""
    states = load_file(str(folder / PIECES_FILE))["states"]
    rows = ABTT.load(folder / ABTT_FILE).apply(states).astype(np.float32)
    tokenizer = stage2.tokenizer
    if tokenizer is None or len(rows) != tokenizer.get_vocab_size(with_added_tokens=True):
        raise InputError("subword pieces need the teacher's subword tokenizer on the model")
    return stage2.with_pieces(PieceTable(rows, tokenizer, weight))


def with_search_modes(model: StaticModel, weight: float, search: float | None) -> StaticModel:
    """``model`` encoding its pieces at ``weight``, and in the query and document modes at ``search`` (their
    other settings, such as rows trained on pairs, kept)."""
    assert model.pieces is not None
    model = model.with_pieces(replace(model.pieces, weight=weight))
    if search is None:
        return model
    return model.with_modes(**both_modes_with(model.modes, piece_weight=search))


def with_words(stage2: StaticModel, words: Sequence[str], vectors: np.ndarray, abtt: ABTT) -> StaticModel:
    """``stage2`` with ``words`` appended: their stage-1 ``vectors`` through the PCA step's fit ``abtt``."""
    return StaticModel(
        [*stage2.vocab, *words],
        np.vstack([stage2.vectors, abtt.apply(vectors)]),
        tokenizer=stage2.tokenizer,
        metadata=stage2.metadata,
        splitter=stage2.splitter.name,
        phrases=stage2.phrase_mode,
    )


def write_analysis(folder: Path, counts: Mapping[str, int], out: Path | None) -> None:
    """Stage-1 vectors, sentence mean, removed components and corpus ``counts`` for ``staticsem analyze``.

    Written to the work ``folder`` (where ``analyze`` looks too); also into the model folder ``out`` when
    given: it is larger than the model and encoding does not need it.
    """
    stage1 = load(folder / "stage1")
    abtt = ABTT.load(folder / ABTT_FILE)
    tensors = {
        "stage1": stage1.vectors.astype(np.float16),
        "mean": abtt.mean,
        "components": abtt.removed,
        "explained": abtt.explained,
        "counts": np.array([counts[w] for w in stage1.vocab], dtype=np.int64),  # corpus frequency
    }
    save_tensors(folder / ANALYSIS_FILE, tensors)
    if out is not None:
        with atomic_file(out / ANALYSIS_FILE) as tmp:
            shutil.copyfile(folder / ANALYSIS_FILE, tmp)
