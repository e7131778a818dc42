"""GloVe's training loop, compiled with numba: the reference ``glove.c`` update, record by record.

For each co-occurrence record (i, j, X_ij), with diff = w_i·w̃_j + b_i + b̃_j − log X_ij and
fdiff = f(X_ij)·diff, the reference code steps every vector component along g = fdiff·w̃_j (clipped to
±100) by η·g / √G, *then* adds (η·g)² to G (G starts at 1), and each bias by fdiff / √G_b (no η), then
adds fdiff² to G_b. So the vectors' step tends to g / √Σg² (AdaGrad at rate 1, not η: η only sets the
start) and the biases learn at rate 1. Threads run over separate stretches of the shuffled records and
update the shared tables without locks ("Hogwild"), as the reference does; one thread is deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from staticsem.errors import InputError

CLIP = 100.0  # the reference's grad_clip_value


def _numba() -> Any:
    try:
        import numba
    except ImportError:
        raise InputError("GloVe training needs numba: pip install 'staticsem[distill]'") from None
    return numba


_compiled: dict[str, Any] = {}


def kernels() -> tuple[Any, Any]:
    """The compiled (train, shuffle) functions (compiled on first use, cached on disk by numba)."""
    if not _compiled:
        numba = _numba()
        fast = {"nsz", "arcp", "contract", "reassoc"}  # no nnan: the NaN check stays
        jit = numba.njit(nogil=True, cache=True, fastmath=fast, error_model="numpy")  # no 1/0 branch
        _compiled["train"] = jit(_train_records)
        _compiled["shuffle"] = numba.njit(nogil=True, cache=True)(_shuffle_records)
    return _compiled["train"], _compiled["shuffle"]


def _train_records(
    rows: np.ndarray,
    cols: np.ndarray,
    counts: np.ndarray,
    w: np.ndarray,
    w_context: np.ndarray,
    b: np.ndarray,
    b_context: np.ndarray,
    g_w: np.ndarray,
    g_context: np.ndarray,
    g_b: np.ndarray,
    g_b_context: np.ndarray,
    eta: float,
    x_max: float,
    alpha: float,
    start: int,
    stop: int,
) -> float:
    """Update the tables with records ``start:stop``; returns Σ f(X)·diff² over them (before each update)."""
    dim = w.shape[1]
    real = w.dtype.type  # the tables' float type: the inner loops stay in it (SIMD-wide)
    rate, clip = real(eta), real(CLIP)
    cost = 0.0
    for k in range(start, stop):
        i, j, x = rows[k], cols[k], float(counts[k])
        dot = real(0.0)
        for d in range(dim):
            dot += w[i, d] * w_context[j, d]
        diff = float(dot) + float(b[i]) + float(b_context[j]) - np.log(x)
        fdiff = diff if x > x_max else (x / x_max) ** alpha * diff
        if not np.isfinite(fdiff):
            continue
        cost += fdiff * diff
        step = real(fdiff)
        for d in range(dim):
            t1 = min(max(step * w_context[j, d], -clip), clip) * rate
            t2 = min(max(step * w[i, d], -clip), clip) * rate
            w[i, d] -= t1 / np.sqrt(g_w[i, d])
            w_context[j, d] -= t2 / np.sqrt(g_context[j, d])
            g_w[i, d] += t1 * t1
            g_context[j, d] += t2 * t2
        b[i] -= step / np.sqrt(g_b[i])
        b_context[j] -= step / np.sqrt(g_b_context[j])
        g_b[i] += step * step
        g_b_context[j] += step * step
    return cost


def _shuffle_records(rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, seed: int) -> None:
    """Fisher-Yates shuffle of the three record arrays together, in place, from ``seed``."""
    np.random.seed(seed)
    for k in range(len(rows) - 1, 0, -1):
        m = np.random.randint(0, k + 1)
        rows[k], rows[m] = rows[m], rows[k]
        cols[k], cols[m] = cols[m], cols[k]
        counts[k], counts[m] = counts[m], counts[k]
