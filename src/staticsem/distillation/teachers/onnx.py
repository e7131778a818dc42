"""ONNX Runtime backends for the teacher's transformer (``onnx``: fp32, ``onnx-int8``: dynamic int8).

The transformer is exported once per teacher and setting with ``torch.onnx.export`` (eager attention, so
ONNX Runtime's transformer optimizer can fuse it), checked against torch on a probe batch (every token's
state must keep cosine ≥ 0.9999, else the fused graph is dropped, and an unfused graph that still
differs is refused), and ``onnx-int8`` then gets ONNX Runtime's dynamic int8 quantisation of the
weights (per output channel). Files are cached in a folder (the distillation's work folder) under a key
made of the weights' SHA-256 and the export settings, so a changed teacher never reuses an old export.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from staticsem.cxxruntime import check_facets
from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.teachers.backends import check_backend
from staticsem.errors import InputError, StaticsemError
from staticsem.io.atomic import atomic_file

logger = logging.getLogger(__name__)
OPSET = 17
MIN_COSINE = 0.9999  # per token, fp32 export vs torch
PROBE = [
    "A man is playing a guitar on the stage.",
    "Static word embeddings are fast.",
    "The quick brown fox jumps over the lazy dog while the farmer, unaware, sleeps in the barn.",
]
FUSED_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "distilbert": "bert"}


class ExportError(StaticsemError):
    """The teacher's transformer cannot be exported to ONNX (its first line says why)."""


def _onnxruntime() -> Any:
    if "onnxruntime" not in sys.modules:
        check_facets("onnxruntime")
    try:
        import onnxruntime
    except ImportError:
        raise InputError(
            "the onnx teacher backends need onnxruntime and onnx (part of staticsem[distill]); "
            "or use --teacher-backend torch"
        ) from None
    return onnxruntime


def weights_digest(module: torch.nn.Module) -> str:
    """SHA-256 of a module's parameter and buffer names, dtypes, shapes and bytes."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        data = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class _Graph(torch.nn.Module):
    """The transformer called with keyword inputs; returns the last layer (and hidden state ``layer``)."""

    def __init__(self, model: torch.nn.Module, names: Sequence[str], layer: int | None) -> None:
        super().__init__()
        self.model, self.names, self.layer = model, tuple(names), layer

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output = self.model(
            **dict(zip(self.names, inputs, strict=True)), output_hidden_states=self.layer is not None
        )
        last = output.last_hidden_state
        return (last,) if self.layer is None else (last, output.hidden_states[self.layer])


@contextlib.contextmanager
def _eager_attention(model: Any) -> Iterator[None]:
    """Attention as plain matrix products while exporting (SDPA's graph is not fused by ORT)."""
    before = getattr(model.config, "_attn_implementation", None)
    try:
        model.set_attn_implementation("eager")
    except (AttributeError, ValueError):
        before = None
    try:
        yield
    finally:
        if before is not None:
            model.set_attn_implementation(before)


def _probe_inputs(tokenizer: Any) -> dict[str, torch.Tensor]:
    batch = tokenizer(PROBE, padding=True, truncation=True, return_tensors="pt")
    return {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


def _token_cosines(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    x, y = a[mask], b[mask]
    return (x * y).sum(-1) / np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1), 1e-12)


class OnnxTransformer:
    """The teacher's transformer run by ONNX Runtime; called like ``Teacher``'s torch transformer.

    :param cache: folder for the exported graphs [a temporary folder for this object's lifetime].
    :param threads: ONNX Runtime's intra-op threads [all cores].
    """

    def __init__(
        self,
        transformer: torch.nn.Module,
        tokenizer: Any,
        backend: str,
        *,
        cache: Path | None = None,
        threads: int | None = None,
    ) -> None:
        if check_backend(backend) == "torch":
            raise ValueError("OnnxTransformer runs the onnx backends only")
        self.ort = _onnxruntime()
        self.transformer, self.tokenizer, self.backend = transformer, tokenizer, backend
        self.threads = threads or os.cpu_count() or 1
        self._tmp = None if cache is not None else tempfile.TemporaryDirectory(prefix="staticsem-onnx-")
        self.cache = Path(cache if cache is not None else self._tmp.name)  # type: ignore[union-attr]
        self.probe = _probe_inputs(tokenizer)  # the export's example batch and the check's reference
        self.names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in self.probe]
        self.digest = weights_digest(transformer)
        self.sessions: dict[int | None, Any] = {}

    def key(self, layer: int | None) -> str:
        """Cache key of the graph for ``layer``: weights, backend, layer, opset and library versions."""
        return fingerprint(
            {
                "weights": self.digest,
                "backend": self.backend,
                "layer": layer,
                "opset": OPSET,
                "inputs": self.names,
                "onnxruntime": self.ort.__version__,
                "torch": torch.__version__.split("+")[0],
            }
        )

    def path(self, layer: int | None) -> Path:
        """The cached graph file for ``layer``."""
        return self.cache / f"teacher-{self.backend}-{self.key(layer)}.onnx"

    def session(self, layer: int | None) -> Any:
        """The ONNX Runtime session for ``layer`` (exported and cached on first use).

        :raises ExportError: when ``torch.onnx.export`` fails on this teacher (the failure is cached as well,
            so a teacher that cannot be exported is not traced again).
        """
        if layer not in self.sessions:
            path = self.path(layer)
            failed = path.with_suffix(".failed")
            if failed.is_file():
                raise ExportError(failed.read_text(encoding="utf-8"))
            if not path.is_file():
                self._build(path, layer)
            else:
                logger.info("teacher backend %s: reusing %s", self.backend, path)
            options = self.ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = self.threads, 1
            options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self.sessions[layer] = self.ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        return self.sessions[layer]

    def __call__(self, inputs: dict[str, torch.Tensor], layer: int | None = None) -> tuple[torch.Tensor, ...]:
        """Last-layer states (and hidden state ``layer``) for tokenised ``inputs``, as torch tensors."""
        feed = {name: inputs[name].cpu().numpy().astype(np.int64, copy=False) for name in self.names}
        return tuple(torch.from_numpy(out) for out in self.session(layer).run(None, feed))

    # ------------------------------------------------------------------ building
    def _build(self, path: Path, layer: int | None) -> None:
        logger.info(
            "teacher backend %s: exporting the transformer to %s (once per teacher)", self.backend, path
        )
        self.cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".export-", dir=self.cache) as tmp:
            plain, fused = Path(tmp) / "plain.onnx", Path(tmp) / "fused.onnx"
            try:
                self._export(plain, layer)
            except Exception as exc:  # the exporter's own (a RuntimeError from its C++ part, often)
                self._refuse(path, exc)
            worst = self._check(plain, layer)
            if worst < MIN_COSINE:
                raise StaticsemError(
                    f"the ONNX export of this teacher differs from torch (token cosine {worst:.6f} < "
                    f"{MIN_COSINE}); use --teacher-backend torch"
                )
            graph = plain
            if self._fuse(plain, fused):
                fused_worst = self._check(fused, layer)
                if fused_worst >= MIN_COSINE:
                    graph = fused
                else:
                    logger.info(
                        "fused graph differs from torch (cosine %.6f); keeping the plain one", fused_worst
                    )
            with atomic_file(path) as out:
                if self.backend == "onnx-int8":
                    with _quiet_export():
                        self._quantize(graph, out)
                else:
                    os.replace(graph, out)

    def _refuse(self, path: Path, exc: Exception) -> NoReturn:
        """Raise ``ExportError`` for a failed export, and keep its message beside ``path`` (the verdict)."""
        kind = getattr(getattr(self.transformer, "config", None), "model_type", "?")
        why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        message = f"the {self.backend} teacher backend cannot export this teacher ({kind}) to ONNX ({why})"
        with atomic_file(path.with_suffix(".failed")) as out:
            out.write_text(message, encoding="utf-8")
        raise ExportError(message) from None

    def _export(self, path: Path, layer: int | None) -> None:
        inputs = self.probe
        outputs = ["last"] if layer is None else ["last", "layer"]
        axes = {name: {0: "batch", 1: "tokens"} for name in (*self.names, *outputs)}
        with _quiet_export(), _eager_attention(self.transformer), torch.no_grad():
            torch.onnx.export(
                _Graph(self.transformer, self.names, layer).eval(),
                tuple(inputs[name] for name in self.names),
                str(path),
                input_names=self.names,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )

    def _check(self, path: Path, layer: int | None) -> float:
        """Lowest per-token cosine between ``path``'s states and torch's on the probe batch."""
        inputs = self.probe
        session = self.ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(None, {n: inputs[n].numpy().astype(np.int64) for n in self.names})
        with torch.no_grad():
            want = _Graph(self.transformer, self.names, layer)(*(inputs[n] for n in self.names))
        mask = inputs["attention_mask"].numpy().astype(bool)
        return min(float(_token_cosines(g, w.numpy(), mask).min()) for g, w in zip(got, want, strict=True))

    def _fuse(self, source: Path, target: Path) -> bool:
        """ONNX Runtime's transformer fusions (attention, layer norm, GELU) where it knows the model."""
        config = getattr(self.transformer, "config", None)
        model_type = FUSED_TYPES.get(str(getattr(config, "model_type", "")))
        if model_type is None:
            return False
        from onnxruntime.transformers.optimizer import optimize_model

        try:
            with _quiet_export():
                model = optimize_model(
                    str(source),
                    model_type=model_type,
                    num_heads=int(getattr(config, "num_attention_heads", 0)),
                    hidden_size=int(getattr(config, "hidden_size", 0)),
                    opt_level=1,
                )
                model.save_model_to_file(str(target))
        except Exception as exc:  # an unknown graph shape: keep the plain export
            logger.info("ONNX Runtime could not fuse this teacher (%s); keeping the plain graph", exc)
            return False
        return True

    @staticmethod
    def _quantize(source: Path, target: Path) -> None:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Hide the exporter's and optimizer's warnings (deprecations, tracer notes) while exporting."""
    import warnings

    logging.disable(logging.WARNING)  # the optimizer and quantiser report every fused node, and advice
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)
