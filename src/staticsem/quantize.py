"""Storage precision of the embedding matrix: float32, float16 or int8 with per-row / per-model scales.

One int8 scale for the whole model spends its 255 steps on the largest value of any row, so a row whose
values are much smaller (a frequent word under SIF / Zipf weights) keeps few steps or becomes all zero.
Per-model scales are therefore refused unless every non-zero row keeps a cosine of at least
``MODEL_SCALE_MIN_COSINE`` to its float values (``benchmarks/int8_scales.py`` measures where that ends).
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from staticsem.errors import InputError, parse_choice

MODEL_SCALE_MIN_COSINE = 0.99


class DType(str, Enum):
    """How the matrix is stored on disk (and in memory)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    INT8 = "int8"


class Scale(str, Enum):
    """Where int8 quantisation takes its scale from."""

    ROW = "row"
    MODEL = "model"


def parse_dtype(value: str | DType) -> DType:
    """Convert a user string to ``DType`` with a readable error."""
    return parse_choice(DType, value, "dtype")


def parse_scale(value: str | Scale) -> Scale:
    """Convert a user string to ``Scale`` with a readable error."""
    return parse_choice(Scale, value, "int8 scale")


def quantize(
    matrix: np.ndarray, dtype: DType, scale: Scale = Scale.ROW
) -> tuple[np.ndarray, np.ndarray | None]:
    """Return the stored matrix and, for int8, its float32 scales (one per row, or one in all).

    :raises InputError: for float16 overflow, or a per-model int8 scale that would lose rows.
    """
    matrix = np.asarray(matrix, dtype=np.float32)
    if dtype is DType.FLOAT32:
        return matrix, None
    if dtype is DType.FLOAT16:
        largest = float(np.abs(matrix).max()) if matrix.size else 0.0
        if largest > float(np.finfo(np.float16).max):
            raise InputError(f"values up to {largest:.6g} do not fit in float16 (max 65504); use float32")
        return matrix.astype(np.float16), None
    if scale is Scale.ROW:
        peak = np.abs(matrix).max(axis=1) if matrix.size else np.zeros(len(matrix), np.float32)
    else:
        peak = np.array([np.abs(matrix).max() if matrix.size else 0.0], dtype=np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    factors = scales[:, None] if scale is Scale.ROW else scales[0]
    stored = np.clip(np.rint(matrix / factors), -127, 127).astype(np.int8)
    if scale is Scale.MODEL:
        _check_model_scale(matrix, stored)
    return stored, scales


def row_cosines(original: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """Cosine of each stored row to its original (1 where the original row is zero, 0 where only it is)."""
    a, b = original.astype(np.float64), stored.astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    cosines = np.divide(dots, norms, out=np.zeros(len(a)), where=norms > 0)
    return np.where(np.any(a != 0, axis=1), cosines, 1.0)


def _check_model_scale(matrix: np.ndarray, stored: np.ndarray) -> None:
    cosines = row_cosines(matrix, stored)
    bad = cosines < MODEL_SCALE_MIN_COSINE
    if bad.any():
        norms = np.linalg.norm(matrix, axis=1)
        used = norms[norms > 0]
        zeroed = int(np.sum(bad & ~np.any(stored != 0, axis=1)))
        raise InputError(
            f"int8 with one scale per model would leave {int(bad.sum())} of {len(matrix)} rows below cosine "
            f"{MODEL_SCALE_MIN_COSINE} to their float values ({zeroed} all zero; row norms span "
            f"{used.min():.3g} to {used.max():.3g}); use one scale per row (--scale row)"
        )


def dequantize(rows: np.ndarray, row_scales: np.ndarray | None) -> np.ndarray:
    """Float32 values of stored ``rows``; ``row_scales`` holds the int8 scale of each row."""
    values = rows.astype(np.float32)
    return values if row_scales is None else values * row_scales[:, None]
