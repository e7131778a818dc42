"""int8 with one scale per row vs one scale per model, on matrices whose row norms spread like real models'.

A token-method model multiplies its rows by Zipf/SIF weights ``sif / (sif + p(rank))``: the most frequent
words' rows are hundreds of times shorter than rare words'. One int8 scale for the whole model spends its
255 steps on the largest value, so short rows keep few steps or none. For a 50,000 x 64 matrix of random
unit directions scaled by those weights (sif = 1e-4, most frequent first), and for matrices whose norms
are spread evenly in log over ``1/spread .. 1``, this prints, per scale: the rows stored as all zeros,
the rows below cosine 0.99 to their float values, the lowest cosine, and whether
``staticsem.quantize.quantize`` accepts the scale (this branch refuses a per-model scale that would leave
a row below cosine 0.99; before, it stored it). The per-model figures are those of the values one scale
would store (``rint(x / (max|x| / 127))``), which is what ``quantize`` returned before it refused.

Run::

    python benchmarks/int8_scales.py --output benchmarks/results/int8_scales.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

ROWS, DIM = 50_000, 64
SPREADS = (1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 64.0)


def matrix(norms: np.ndarray, dim: int, seed: int = 0) -> np.ndarray:
    """Random unit directions times ``norms``."""
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(len(norms), dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return (directions * norms[:, None]).astype(np.float32)


def row_cosines(original: np.ndarray, restored: np.ndarray) -> np.ndarray:
    """Cosine of each restored row to its original (0 for a row stored as zeros)."""
    norms = np.linalg.norm(original, axis=1) * np.linalg.norm(restored, axis=1)
    dots = np.einsum("ij,ij->i", original.astype(np.float64), restored.astype(np.float64))
    return np.divide(dots, norms, out=np.zeros(len(original)), where=norms > 0)


def measure(values: np.ndarray, scale: str) -> dict[str, Any]:
    """What int8 with ``scale`` keeps of ``values``, and whether staticsem accepts it."""
    from staticsem.errors import InputError
    from staticsem.quantize import DType, Scale, quantize

    try:
        stored, scales = quantize(values, DType.INT8, Scale(scale))
        refused = None
    except InputError as exc:  # measure what that one scale would have stored
        scales = np.array([np.abs(values).max() / 127.0], np.float32)
        stored = np.clip(np.rint(values / scales[0]), -127, 127).astype(np.int8)
        refused = str(exc)
    assert scales is not None
    restored = stored.astype(np.float32) * (scales[:, None] if scales.size > 1 else scales[0])
    cosines = row_cosines(values, restored)
    return {
        "scale": scale,
        "rows_all_zero": int(np.sum(~np.any(stored != 0, axis=1))),
        "rows_below_0.99": int(np.sum(cosines < 0.99)),
        "lowest_cosine": round(float(cosines.min()), 4),
        "accepted": refused is None,
        "refusal": refused,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, help="Write the results as JSON here.")
    args = parser.parse_args()
    from staticsem.distillation.methods.token.run import zipf_weights

    cases = [("Zipf/SIF weights (sif 1e-4)", zipf_weights(ROWS, 1e-4))]
    cases += [(f"norms spread {s:g}x", np.geomspace(1 / s, 1, ROWS)) for s in SPREADS]
    rows: list[dict[str, Any]] = []
    print(f"{ROWS:,} x {DIM} matrices, random directions")
    print(
        f"{'row norms':<30} {'scale':<6} {'zero rows':>13} {'rows < 0.99':>11} {'lowest cos':>10}  accepted"
    )
    for name, norms in cases:
        values = matrix(norms.astype(np.float64), DIM)
        for scale in ("row", "model"):
            result = {"matrix": name, "norm_span": float(norms.max() / norms.min()), **measure(values, scale)}
            rows.append(result)
            print(
                f"{name:<30} {scale:<6} {result['rows_all_zero']:>13,} {result['rows_below_0.99']:>11,} "
                f"{result['lowest_cosine']:>10.4f}  {'yes' if result['accepted'] else 'refused'}"
            )
    refusal = next((r["refusal"] for r in rows if r["refusal"]), None)
    if refusal:
        print(f"\nrefusal message, first case: {refusal}")
    common.save_json(args.output, {"rows": ROWS, "dim": DIM, "results": rows})


if __name__ == "__main__":
    main()
