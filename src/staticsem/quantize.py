"""Storage precision of the embedding matrix: float32, float16 or int8 with per-row / per-model scales."""

from __future__ import annotations

from enum import Enum

import numpy as np

from staticsem.errors import InputError, parse_choice


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
    """Return the stored matrix and, for int8, its float32 scales (one per row, or one in all)."""
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
    return np.clip(np.rint(matrix / factors), -127, 127).astype(np.int8), scales


def dequantize(rows: np.ndarray, row_scales: np.ndarray | None) -> np.ndarray:
    """Float32 values of stored ``rows``; ``row_scales`` holds the int8 scale of each row."""
    values = rows.astype(np.float32)
    return values if row_scales is None else values * row_scales[:, None]
