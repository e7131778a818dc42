"""``distill``: one entry point for every distillation method."""

from __future__ import annotations

import contextlib
import inspect
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
    ASE = "ase"
    X2STATIC = "x2static"
    TOKEN = "token"
    WORD2VEC = "word2vec"
    FASTTEXT = "fasttext"
    GLOVE = "glove"


SCALED_METHODS = (Method.SWE, Method.ASE, Method.X2STATIC)  # what runs on a Ray cluster
CORPUS_METHODS = (Method.SWE, Method.ASE, Method.X2STATIC, Method.WORD2VEC, Method.FASTTEXT, Method.GLOVE)


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
    ray: str | None = None,
    ray_workers: int | None = None,
    teacher_backend: str | None = None,
    **options: Any,
) -> StaticModel:
    """Distil a static model from ``teacher`` (``None``: the packaged all-MiniLM-L6-v2), or train a baseline.

    :param method: ``swe`` (corpus → extraction → sentence PCA → knowledge distillation, the default),
        ``ase`` (stage 1 alone, from any teacher ``layer``; teacher width), ``x2static`` (CBOW with
        negative sampling against teacher contexts; teacher width), ``token`` (each vocabulary word alone
        through the teacher; no corpus), ``word2vec`` / ``fasttext`` (gensim on the corpus; no teacher),
        ``glove`` (co-occurrence counts and GloVe's weighted least squares; no teacher).
    :param out: folder to save the model to; work files live beside it in ``.NAME.work`` (or ``work_dir``,
        which several runs of one method may share to reuse their steps).
    :param corpus: text files (``.txt``, ``.gz``, ``.jsonl``), ``-`` or ``embedded`` (corpus methods);
        ``LANG=FILE`` tags a language, and two or more languages give a cross-lingual swe/ase model.
    :param options: method settings: the fields of ``SWESettings`` (swe, ase: e.g. ``sentences_per_word``,
        ``layer``, ``objective``/``parallel`` for contrastive training, ``kd_corpus`` (text read for
        distillation targets only), ``languages``, ``prompt``),
        ``keep_analysis`` (swe: also put ``analysis.safetensors`` in the model folder, not only in the
        work folder), ``X2StaticSettings`` (x2static: e.g. ``context``, ``epochs``), the keywords of
        ``distill_classic`` (word2vec, fasttext: e.g. ``sg``, ``epochs``), the fields of ``GloveSettings``
        (glove: e.g. ``window``, ``epochs``, ``x_max``), ``sif``/``batch_size`` (token).
    :param ray: swe, ase, x2static: run word counting and the teacher passes on a Ray cluster (``auto``,
        ``local``, ``HOST:PORT`` or ``ray://HOST:PORT``; needs ``staticsem[ray]``) with ``ray_workers``
        teacher replicas [one per GPU, else one per CPU]; the model equals the single-process one.
    :param teacher_backend: swe, ase, x2static, token: what runs the teacher's transformer: ``torch``,
        ``onnx`` (ONNX Runtime, fp32: torch's token states) or ``onnx-int8`` (dynamic int8 weights,
        fastest) [``DEFAULT_BACKEND``]; recorded in the model's config.json.
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
    if (ray is not None or ray_workers is not None) and method not in SCALED_METHODS:
        raise InputError("ray and ray_workers are for the swe, ase and x2static methods")
    if teacher_backend is not None:
        if method not in (*SCALED_METHODS, Method.TOKEN):
            raise InputError(
                f"the {method.value} method runs no teacher; teacher_backend is for swe, ase, x2static, token"
            )
        from staticsem.distillation.onnx_teacher import check_backend

        options["teacher_backend"] = check_backend(teacher_backend)
    if method is Method.TOKEN:
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
            **options,
        )
    if method in (Method.WORD2VEC, Method.FASTTEXT, Method.GLOVE):
        if vocabulary is not None:
            raise InputError(
                f"{method.value} takes its vocabulary from the corpus (vocab_size, min_count); "
                "a word list is for swe, ase, x2static and token"
            )
        if method is Method.GLOVE:
            work = Path(work_dir) if work_dir is not None else None
            return _distill_glove(
                out, work, corpus, vocab_size, dim, seed, dtype, keep_work, show_progress, options
            )
        return _distill_classic(method, out, corpus, vocab_size, dim, seed, dtype, show_progress, options)
    if out is None:
        raise InputError(f"the {method.value} method needs an output folder (it keeps checkpoints beside it)")
    common: dict[str, Any] = {
        "corpus": tuple(corpus),
        "teacher": teacher,
        "seed": seed,
        "vocabulary": None if vocabulary is None else str(vocabulary),
        "vocab_size": vocab_size or 50_000,
    }
    runner: Any
    settings_type: Any
    if method is Method.X2STATIC:
        from staticsem.distillation.x2static import X2StaticRun, X2StaticSettings

        runner, settings_type, extra = X2StaticRun, X2StaticSettings, {}
    else:
        from staticsem.distillation.pipeline import Pipeline, SWESettings

        runner, settings_type, extra = Pipeline, SWESettings, {"method": method.value}
        if method is Method.SWE:
            extra["keep_analysis"] = bool(options.pop("keep_analysis", False))
        common["dim"] = dim
        if method is Method.ASE:
            if "stages" in options:
                raise InputError("the ase method is stage 1 alone; --stages is for swe")
            common["stages"] = ("extract",)
    for name in ("parallel", "languages", "kd_corpus"):  # lists of paths or codes become the settings' tuples
        if name in options and not isinstance(options[name], str):
            options[name] = tuple(str(item) for item in options[name])
    unknown = sorted(set(options) - {f.name for f in fields(settings_type)})
    if unknown:
        raise InputError(f"unknown {method.value} options: {', '.join(unknown)}")
    settings = settings_type(**common, **options)
    settings.validate()  # before any cluster starts
    with contextlib.ExitStack() as stack:
        scale = None
        if ray is not None or ray_workers is not None:
            from staticsem.scale.distill import RayScale

            scale = stack.enter_context(RayScale(ray or "auto", ray_workers, show_progress=show_progress))
        run = runner(
            settings,
            Path(out),
            trust_remote_code=trust_remote_code,
            show_progress=show_progress,
            work_dir=None if work_dir is None else Path(work_dir),
            scale=scale,
            **extra,
        )
        model: StaticModel = run.run(dtype=dtype)
    if not keep_work:
        shutil.rmtree(run.work.folder, ignore_errors=True)
    return model


def _distill_classic(
    method: Method,
    out: str | Path | None,
    corpus: list[str] | tuple[str, ...],
    vocab_size: int | None,
    dim: int,
    seed: int,
    dtype: str,
    show_progress: bool,
    options: dict[str, Any],
) -> StaticModel:
    from staticsem.distillation.classic import distill_classic

    fixed = {"corpus", "algorithm", "dim", "vocab_size", "seed", "show_progress"}
    unknown = sorted(set(options) - (set(inspect.signature(distill_classic).parameters) - fixed))
    if unknown:
        raise InputError(f"unknown {method.value} options: {', '.join(unknown)}")
    model = distill_classic(
        tuple(corpus),
        algorithm=method.value,
        dim=dim,
        vocab_size=vocab_size or 50_000,
        seed=seed,
        show_progress=show_progress,
        **options,
    )
    if out is not None:
        model.save(out, dtype=dtype)
    return model


def _distill_glove(
    out: str | Path | None,
    work_dir: Path | None,
    corpus: list[str] | tuple[str, ...],
    vocab_size: int | None,
    dim: int,
    seed: int,
    dtype: str,
    keep_work: bool,
    show_progress: bool,
    options: dict[str, Any],
) -> StaticModel:
    import dataclasses

    from staticsem.distillation.checkpoint import work_folder
    from staticsem.distillation.corpus import CorpusOptions
    from staticsem.distillation.glove import GloveSettings, distill_glove

    corpus_options = options.pop("options", None) or CorpusOptions()
    known = {f.name for f in dataclasses.fields(GloveSettings)} - {"dim", "vocab_size", "seed"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InputError(f"unknown glove options: {', '.join(unknown)}")
    settings = GloveSettings(dim=dim, vocab_size=vocab_size or 50_000, seed=seed, **options)
    if work_dir is None and out is not None:
        work_dir = work_folder(Path(out))
    model = distill_glove(
        tuple(corpus),
        settings=settings,
        options=corpus_options,
        work_dir=work_dir,
        show_progress=show_progress,
    )
    if out is not None:
        model.save(out, dtype=dtype)
        if work_dir is not None and not keep_work:
            shutil.rmtree(work_dir, ignore_errors=True)
    return model


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
    sif: float | None = 1e-4,
    batch_size: int = 256,
    teacher_backend: str | None = None,
) -> StaticModel:
    from staticsem.distillation.checkpoint import work_folder
    from staticsem.distillation.teacher import Teacher
    from staticsem.distillation.token import distill_token
    from staticsem.distillation.vocabulary import read_word_list

    started = time.perf_counter()
    if batch_size < 1:
        raise InputError("batch_size must be positive")
    words = read_word_list(Path(vocabulary), vocab_size) if vocabulary is not None else None
    from staticsem.distillation.onnx_teacher import DEFAULT_BACKEND

    work_dir = work_folder(Path(out)) if out is not None else None
    model_teacher = Teacher(
        teacher,
        trust_remote_code=trust_remote_code,
        backend=teacher_backend or DEFAULT_BACKEND,
        cache=None if work_dir is None else work_dir / "onnx",
    )
    if words is None:
        words = model_teacher.vocabulary_tokens()[:vocab_size]
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
