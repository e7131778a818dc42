"""Text classifiers on staticsem models: ``StaticClassifier.fit`` (torch, ``staticsem[train]``) and
``StaticClassifier.load`` / ``predict`` (numpy only, like encoding).

Importing this package does not import torch; ``fit`` does.
"""

from __future__ import annotations

from staticsem.train.classifier import Prediction, StaticClassifier, is_classifier
from staticsem.train.data import Columns, read_examples

__all__ = ["Columns", "Prediction", "StaticClassifier", "is_classifier", "read_examples"]
