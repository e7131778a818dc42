"""int8 storage: what each scale keeps on realistic row-norm spreads, and what is stored on disk."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

import staticsem
from staticsem import StaticModel
from staticsem.distillation.methods.token.run import zipf_weights
from staticsem.errors import InputError
from staticsem.quantize import MODEL_SCALE_MIN_COSINE, DType, Scale, dequantize, quantize, row_cosines


def sif_matrix(rows: int = 50_000, dim: int = 64, spread: float | None = None) -> np.ndarray:
    """Random directions with the row norms of a token-method model (Zipf/SIF weights, most frequent
    first), or norms spread evenly (in log) over ``1 / spread .. 1``."""
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(rows, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    norms = zipf_weights(rows, 1e-4) if spread is None else np.geomspace(1 / spread, 1, rows)
    return (matrix * norms[:, None].astype(np.float32)).astype(np.float32)


def test_one_scale_per_model_is_refused_where_it_would_zero_frequent_words() -> None:
    matrix = sif_matrix()
    with pytest.raises(InputError, match=r"rows below cosine 0\.99 .*all zero.*--scale row") as info:
        quantize(matrix, DType.INT8, Scale.MODEL)
    assert len(str(info.value).splitlines()) == 1
    stored, scales = quantize(matrix, DType.INT8, Scale.ROW)
    cosines = row_cosines(matrix, dequantize(stored, scales))
    assert np.any(stored != 0, axis=1).all() and cosines.min() >= 0.999


@pytest.mark.parametrize(("spread", "accepted"), [(2.0, True), (8.0, True), (16.0, False), (64.0, False)])
def test_one_scale_per_model_keeps_every_row_it_accepts(spread: float, accepted: bool) -> None:
    """The stated limit: accepted only when every row keeps cosine >= 0.99 (64 dims: norms within ~12x)."""
    matrix = sif_matrix(spread=spread)
    if not accepted:
        with pytest.raises(InputError, match="one scale per model"):
            quantize(matrix, DType.INT8, Scale.MODEL)
        return
    stored, scales = quantize(matrix, DType.INT8, Scale.MODEL)
    assert scales is not None and scales.shape == (1,)
    values = stored.astype(np.float32) * scales[0]
    assert row_cosines(matrix, values).min() >= MODEL_SCALE_MIN_COSINE


@pytest.mark.parametrize("scale", ["row", "model"])
def test_int8_scale_is_stored_as_asked(tiny_model: StaticModel, tmp_path: Path, scale: str) -> None:
    path = tiny_model.save(tmp_path / "m", dtype="int8", scale=scale)
    with safe_open(str(path / "model.safetensors"), "np") as tensors:
        stored = {name: tensors.get_tensor(name) for name in tensors.keys()}  # noqa: SIM118
    assert stored["scales"].shape == ((1,) if scale == "model" else (len(tiny_model),))
    assert json.loads((path / "config.json").read_text())["int8_scale"] == scale
    peaks = np.abs(tiny_model.vectors).max(axis=1 if scale == "row" else None)
    np.testing.assert_allclose(stored["scales"], np.atleast_1d(peaks) / 127, rtol=1e-6)
    loaded = staticsem.load(path)
    assert loaded.scales is not None and (np.ptp(loaded.scales) == 0) == (scale == "model")
    np.testing.assert_array_equal(loaded.vectors, stored["embeddings"])
