"""``distill``: one entry point for every distillation method, found in the registry by name."""

from __future__ import annotations

import dataclasses
import logging
import re
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from staticsem.distillation.method import Frame, Method, Need, listing
from staticsem.distillation.methods import get_method, methods
from staticsem.distillation.teachers.device import check_device
from staticsem.distillation.workers import check_workers
from staticsem.errors import InputError, MissingExtra
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)

LICENSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*")  # an SPDX-like id, as model cards name them
# Why a method refuses one of ``distill``'s common arguments that its settings lack.
_REFUSALS = {
    "teacher": "the {method} method runs no teacher",
    "teacher_backend": "the {method} method runs no teacher",
    "vocabulary": "{method} takes its vocabulary from the corpus (vocab_size, min_count)",
    "corpus": "the {method} method reads no corpus",
}


def distill(
    method: str = "swe",
    *,
    teacher: str | None = None,
    out: str | Path | None = None,
    corpus: list[str] | tuple[str, ...] | None = None,
    vocabulary: str | Path | None = None,
    vocab_size: int | None = None,
    dim: int | None = None,
    seed: int | None = None,
    dtype: str = "float16",
    keep_work: bool = True,
    work_dir: str | Path | None = None,
    trust_remote_code: bool = False,
    show_progress: bool = True,
    ray: str | None = None,
    ray_workers: int | None = None,
    teacher_backend: str | None = None,
    device: str = "auto",
    workers: int | None = None,
    license: str | None = None,
    **options: Any,
) -> StaticModel:
    """Distil a static model from ``teacher`` (``None``: the packaged all-MiniLM-L6-v2), or train a baseline.

    ``corpus``, ``teacher``, ``vocabulary``, ``vocab_size``, ``dim``, ``seed`` and ``teacher_backend`` are
    settings most methods share; ``None`` keeps the method's default. ``corpus`` takes text files (``.txt``,
    ``.gz``, ``.jsonl``), ``-`` or ``embedded``; ``LANG=FILE`` tags a language (swe, ase).
    ``teacher_backend``: ``torch``, ``onnx`` or ``onnx-int8`` (the default), what runs the teacher's
    transformer.

    :param method: a registered method (``staticsem.distillation.methods.methods()``): ``swe`` (corpus →
        extraction → sentence PCA → knowledge distillation, the default), ``ase`` (stage 1 alone, from any
        teacher ``layer``), ``x2static``, ``token`` (no corpus), ``word2vec`` / ``fasttext`` (gensim; no
        teacher), ``glove`` (no teacher).
    :param out: folder to save the model to; work files live beside it in ``.NAME.work`` (or ``work_dir``,
        which several runs of one method may share to reuse their steps).
    :param options: the other fields of the method's settings dataclass (``method.settings``), e.g.
        ``sentences_per_word``, ``kd=KDSettings(...)``, ``objective``/``parallel`` (swe), ``layer`` (swe,
        ase), ``context``, ``epochs`` (x2static), ``sg``, ``window`` (word2vec, fasttext), ``x_max``
        (glove), ``sif`` (token). The model's config.json records them all.
    :param ray: methods that scale (swe, ase, x2static): count words and run the teacher passes on a Ray
        cluster (``auto``, ``local``, ``HOST:PORT`` or ``ray://HOST:PORT``; needs ``staticsem[ray]``) with
        ``ray_workers`` teacher replicas [one per GPU, else one per CPU]; the model equals the single-process
        one.
    :param device: where the teacher and the training run: ``auto`` (a CUDA GPU where torch sees one, else
        the CPU), ``cpu``, ``cuda`` or ``cuda:N``. On a GPU the teacher runs in torch at
        ``teacher_precision`` (``auto``: fp16); on the CPU in ONNX Runtime with int8 weights.
    :param workers: processes for the corpus's passes (reading, counting, choosing, hashing) [every core].
    :param license: the model's licence id (e.g. ``apache-2.0``) for config.json and the card [the licence
        the teacher's model card names, else unknown].
    :raises InputError: for unknown methods or options, bad settings, unreadable inputs, CUDA without a GPU.
    """
    chosen = get_method(method)
    require_extras()
    common = {
        "teacher": teacher,
        "corpus": corpus,
        "vocabulary": vocabulary,
        "vocab_size": vocab_size,
        "dim": dim,
        "seed": seed,
        "teacher_backend": teacher_backend,
    }
    settings = make_settings(chosen, {**{k: v for k, v in common.items() if v is not None}, **options})
    scaled = ray is not None or ray_workers is not None
    _check_frame(chosen, out, scaled)
    settings.validate()  # before any cluster starts
    if license is not None and not LICENSE_ID.fullmatch(license):
        raise InputError(f"--license takes a licence id such as apache-2.0 or mit, got {license!r}")
    frame = Frame(
        out=None if out is None else Path(out),
        dtype=dtype,
        keep_work=keep_work,
        work_dir=None if work_dir is None else Path(work_dir),
        trust_remote_code=trust_remote_code,
        show_progress=show_progress,
        workers=check_workers(workers),
        device=check_device(device),
    )
    model = _run(chosen, settings, frame, (ray or "auto", ray_workers) if scaled else None)
    found = _license(chosen, settings, license)
    if found is not None:
        model.metadata["license"] = found
    if frame.out is not None:
        from staticsem.io.card import refresh
        from staticsem.io.common import write_metadata

        if found is not None:
            write_metadata(frame.out, license=found)
        refresh(frame.out)  # README.md: what the folder holds and how it was made
    return model


def _license(method: Method, settings: Any, given: str | None) -> dict[str, str] | None:
    """The model's licence and where it comes from: ``given``, else what the teacher's model card names."""
    if given is not None:
        return {"id": given, "source": "build"}
    if Need.TEACHER not in method.needs:
        return None
    from staticsem.distillation.teachers.teacher import teacher_license

    found = teacher_license(settings.teacher)
    return None if found is None else {"id": found, "source": "teacher"}


def _check_frame(method: Method, out: str | Path | None, scaled: bool) -> None:
    """Refuse Ray for a method that does not scale, and no ``out`` where the method keeps checkpoints."""
    if scaled and not method.scalable:
        raise InputError(
            f"ray and ray_workers are for the {listing([m.name for m in methods() if m.scalable])} methods"
        )
    if out is None and method.needs_out:
        raise InputError(f"the {method.name} method needs an output folder (it keeps checkpoints beside it)")


def _run(method: Method, settings: Any, frame: Frame, cluster: tuple[str, int | None] | None) -> StaticModel:
    """Run ``method`` in ``frame``; with ``cluster`` (address, replicas), its teacher passes on Ray."""
    if cluster is None:
        return method.runner()(settings, frame)
    from staticsem.scale.distill import RayScale

    with RayScale(*cluster, show_progress=frame.show_progress) as scale:
        return method.runner()(settings, dataclasses.replace(frame, scale=scale))


def require_extras() -> None:
    """Raise ``MissingExtra`` (an ``ImportError``) naming the install line when the ``distill`` extra is
    missing."""
    missing = [name for name in ("torch", "sentence_transformers", "sklearn") if find_spec(name) is None]
    if missing:
        raise MissingExtra(
            f"staticsem.distillation needs {', '.join(missing)}: install torch==2.13.0 (or your own build), "
            "then `pip install 'staticsem[distill]'`"
        )


def make_settings(method: Method, values: dict[str, Any]) -> Any:
    """``method``'s settings from ``values`` (field names; lists become tuples, paths strings).

    :raises InputError: for a name that is no field of the method's settings, in one line that says why.
    """
    fields = {f.name: f for f in dataclasses.fields(method.settings)}
    for name in [n for n in _REFUSALS if n in values and n not in fields]:
        owners = [m.name for m in methods() if name in {f.name for f in dataclasses.fields(m.settings)}]
        reason = _REFUSALS[name].format(method=method.name)
        raise InputError(f"{reason}; {name} is for {listing(owners, ', ')}")
    unknown = sorted(set(values) - set(fields))
    if unknown:
        elsewhere = sorted(
            {m.name for m in methods() for f in dataclasses.fields(m.settings) if f.name in unknown}
        )
        where = f"; {', '.join(unknown)}: {listing(elsewhere)}" if elsewhere else ""
        raise InputError(
            f"unknown {method.name} options: {', '.join(unknown)} ({method.name}: {method.summary}{where})"
        )
    return method.settings(**{name: _plain(fields[name], value) for name, value in values.items()})


def _plain(field: dataclasses.Field[Any], value: Any) -> Any:
    """Paths as strings, and lists (of paths) as the tuples of strings the settings hold."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple) and isinstance(field.default, tuple):
        return tuple(str(item) for item in value)
    return value
