"""Distillation of static models from Sentence Transformers (running a method needs ``pip install
'staticsem[distill]'``; the registry and the settings import without it).

- ``methods/``: one package per method (settings dataclass, declaration, run), found by name in the registry;
- ``stages/``: what SWE is made of (extraction, sentence PCA, distillation / contrastive training, merge);
- ``corpus/``, ``teachers/``, ``checkpoint.py``: the machinery under them (corpus reading, sampling and
  vocabularies; the teacher and its backends; resumable work), and ``steps.py``, the steps frame of the
  corpus methods above it;
- ``method.py``: the contract; ``api.py``: ``distill``.
"""

from __future__ import annotations

from staticsem.distillation.api import distill
from staticsem.distillation.method import Method
from staticsem.distillation.methods import get_method, methods, register_method

__all__ = ["Method", "distill", "get_method", "methods", "register_method"]
