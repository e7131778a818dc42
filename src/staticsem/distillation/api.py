"""``distill``: one entry point for every distillation method."""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Any

from staticsem.errors import InputError
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)


class Method(str, Enum):
    """Distillation methods."""

    SWE = "swe"
    TOKEN = "token"


def distill(
    method: Method | str = Method.SWE,
    *,
    teacher: str | None = None,
    out: str | Path | None = None,
    corpus: list[str] | tuple[str, ...] = ("embedded",),
    vocabulary: str | Path | None = None,
    vocab_size: int | None = None,
    dim: int = 256,
    seed: int = 0,
    dtype: str = "float16",
    keep_work: bool = True,
    work_dir: str | Path | None = None,
    trust_remote_code: bool = False,
    show_progress: bool = True,
    **options: Any,
) -> StaticModel:
    """Distil a static model from ``teacher`` (``None``: the packaged all-MiniLM-L6-v2).

    :param method: ``swe`` (corpus → extraction → sentence PCA → knowledge distillation, the default)
        or ``token`` (each vocabulary word alone through the teacher; no corpus).
    :param out: folder to save the model to; work files live beside it in ``.NAME.work`` (or ``work_dir``,
        which several runs may share to reuse the extraction).
    :param corpus: text files (``.txt``, ``.gz``, ``.jsonl``), ``-`` or ``embedded`` (SWE only).
    :param options: method settings: for ``swe`` the fields of ``SWESettings`` (e.g. ``sentences_per_word``,
        ``stages``, ``kd``), for ``token`` ``sif`` and ``batch_size``.
    :raises InputError: for unknown methods or options, bad sizes, unreadable inputs.
    """
    try:
        method = Method(method)
    except ValueError:
        raise InputError(
            f"unknown method {method!r}; choose one of {', '.join(m.value for m in Method)}"
        ) from None
    if dim < 1 or (vocab_size is not None and vocab_size < 1):
        raise InputError("dim and vocab_size must be positive")
    started = time.perf_counter()
    if method is Method.SWE:
        if out is None:
            raise InputError("the swe method needs an output folder (it keeps checkpoints beside it)")
        from staticsem.distillation.pipeline import Pipeline, SWESettings

        names = {f.name for f in fields(SWESettings)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise InputError(f"unknown swe options: {', '.join(unknown)}")
        settings = SWESettings(
            corpus=tuple(corpus),
            teacher=teacher,
            dim=dim,
            seed=seed,
            vocabulary=None if vocabulary is None else str(vocabulary),
            vocab_size=vocab_size or 50_000,
            **options,
        )
        pipeline = Pipeline(
            settings,
            Path(out),
            trust_remote_code=trust_remote_code,
            show_progress=show_progress,
            work_dir=None if work_dir is None else Path(work_dir),
        )
        model = pipeline.run(dtype=dtype)
        if not keep_work:
            pipeline.clean()
        return model
    return _distill_token(
        teacher,
        out,
        vocabulary,
        vocab_size,
        dim,
        seed,
        dtype,
        trust_remote_code,
        show_progress,
        started,
        **options,
    )


def _distill_token(
    teacher: str | None,
    out: str | Path | None,
    vocabulary: str | Path | None,
    vocab_size: int | None,
    dim: int,
    seed: int,
    dtype: str,
    trust_remote_code: bool,
    show_progress: bool,
    started: float,
    sif: float | None = 1e-4,
    batch_size: int = 256,
) -> StaticModel:
    from staticsem.distillation.checkpoint import work_folder
    from staticsem.distillation.teacher import Teacher
    from staticsem.distillation.token import distill_token
    from staticsem.distillation.vocabulary import read_word_list

    if batch_size < 1:
        raise InputError("batch_size must be positive")
    words = read_word_list(Path(vocabulary), vocab_size) if vocabulary is not None else None
    model_teacher = Teacher(teacher, trust_remote_code=trust_remote_code)
    if words is None:
        words = model_teacher.vocabulary_tokens()[:vocab_size]
    work_dir = work_folder(Path(out)) if out is not None else None
    model = distill_token(
        model_teacher,
        words,
        dim=dim,
        sif=sif,
        batch_size=batch_size,
        work_dir=work_dir,
        seed=seed,
        show_progress=show_progress,
    )
    model.metadata["settings"]["vocabulary"] = str(vocabulary) if vocabulary else "teacher tokens"
    model.metadata["seconds"] = round(time.perf_counter() - started, 1)
    if out is not None:
        model.save(out, dtype=dtype)
        if work_dir is not None:
            shutil.rmtree(work_dir, ignore_errors=True)
    return model
