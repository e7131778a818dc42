"""A classifier's head in numpy: standardisation, then dense layers (what ``fit`` trains and saves)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from staticsem.errors import ModelFormatError


@dataclass
class Head:
    """Standardisation (``mean``, ``scale``) then dense layers; ReLU between them."""

    mean: np.ndarray
    scale: np.ndarray
    weights: list[np.ndarray]  # each (out, in), as torch's nn.Linear stores them
    biases: list[np.ndarray]

    def __post_init__(self) -> None:
        dim = self.mean.shape[0] if self.mean.ndim == 1 else -1
        if dim < 1 or self.scale.shape != (dim,) or not self.weights or len(self.weights) != len(self.biases):
            raise ModelFormatError(
                f"classifier head: mean {self.mean.shape}, scale {self.scale.shape}, "
                f"{len(self.weights)} weights and {len(self.biases)} biases do not fit together"
            )
        for at, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if w.ndim != 2 or w.shape[1] != dim or b.shape != (w.shape[0],):
                raise ModelFormatError(
                    f"classifier head layer {at}: weight {w.shape} and bias {b.shape} "
                    f"do not take {dim} inputs"
                )
            dim = w.shape[0]

    @property
    def inputs(self) -> int:
        return int(self.mean.shape[0])

    @property
    def outputs(self) -> int:
        return int(self.weights[-1].shape[0])

    def logits(self, features: np.ndarray) -> np.ndarray:
        hidden = (features - self.mean) / self.scale
        for at, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            hidden = hidden @ w.T + b
            if at < len(self.weights) - 1:
                hidden = np.maximum(hidden, 0.0)
        return hidden.astype(np.float32, copy=False)

    def tensors(self) -> dict[str, np.ndarray]:
        out = {"mean": self.mean, "scale": self.scale}
        for at, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            out[f"layers.{at}.weight"], out[f"layers.{at}.bias"] = w, b
        return {name: np.asarray(value, np.float32) for name, value in out.items()}

    @classmethod
    def from_tensors(cls, tensors: dict[str, np.ndarray]) -> Head:
        layers = sum(1 for name in tensors if name.endswith(".weight"))
        try:
            return cls(
                tensors["mean"],
                tensors["scale"],
                [tensors[f"layers.{at}.weight"] for at in range(layers)],
                [tensors[f"layers.{at}.bias"] for at in range(layers)],
            )
        except KeyError as exc:
            raise ModelFormatError(f"classifier head: tensor {exc.args[0]!r} is missing") from None
