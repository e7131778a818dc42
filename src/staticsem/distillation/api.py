"""``distill``: one entry point for every distillation method."""

from __future__ import annotations

import logging
import time
from enum import Enum
from pathlib import Path

from staticsem.errors import InputError
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)


class Method(str, Enum):
    """Distillation methods."""

    TOKEN = "token"


def distill(
    method: Method | str = Method.TOKEN,
    *,
    teacher: str | None = None,
    out: str | Path | None = None,
    vocabulary: str | Path | None = None,
    vocab_size: int | None = None,
    dim: int = 256,
    sif: float | None = 1e-4,
    batch_size: int = 256,
    seed: int = 0,
    dtype: str = "float16",
    trust_remote_code: bool = False,
    show_progress: bool = True,
) -> StaticModel:
    """Distil a static model from ``teacher`` (``None``: the packaged all-MiniLM-L6-v2).

    :param method: ``token`` feeds each vocabulary word alone through the teacher (no corpus).
    :param out: folder to save the model to (work files live in ``out/.work`` until it is saved).
    :param vocabulary: word list file (most frequent first); default: the teacher's whole-word tokens.
    :raises InputError: for unknown methods, bad sizes, or unreadable vocabulary files.
    """
    try:
        method = Method(method)
    except ValueError:
        raise InputError(
            f"unknown method {method!r}; choose one of {', '.join(m.value for m in Method)}"
        ) from None
    if dim < 1 or (vocab_size is not None and vocab_size < 1) or batch_size < 1:
        raise InputError("dim, vocab_size and batch_size must be positive")
    from staticsem.distill.teacher import Teacher
    from staticsem.distill.token import distill_token
    from staticsem.distill.vocabulary import read_word_list

    started = time.perf_counter()
    words = read_word_list(Path(vocabulary), vocab_size) if vocabulary is not None else None
    model_teacher = Teacher(teacher, trust_remote_code=trust_remote_code)
    if words is None:
        words = model_teacher.vocabulary_tokens()[:vocab_size]
    work_dir = Path(out).parent / f".{Path(out).name}.work" if out is not None else None
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
            import shutil

            shutil.rmtree(work_dir, ignore_errors=True)
    return model
