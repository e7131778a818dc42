"""Distillation of static models from Sentence Transformers (needs ``pip install 'staticsem[distill]'``)."""

from __future__ import annotations

from importlib.util import find_spec

_MISSING = [name for name in ("torch", "sentence_transformers", "sklearn") if find_spec(name) is None]
if _MISSING:
    raise ImportError(
        f"staticsem.distillation needs {', '.join(_MISSING)}: install torch==2.13.0 (or your own build), "
        "then `pip install 'staticsem[distill]'`"
    )

from staticsem.distillation.api import Method, distill  # noqa: E402

__all__ = ["Method", "distill"]
