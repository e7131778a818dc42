"""Evaluation: one task per module behind the ``Evaluator`` contract, for any ``Encoder``.

Tasks (each reads the plain formats of a data folder): ``wordsim.WordSimilarity``, ``wordsim.Analogy``,
``sts.STS``, ``sts.MultilingualSTS``, ``sts.CrossLingualSTS``, ``bitext.BitextRetrieval``,
``classification.Classification``, ``retrieval.Retrieval``, ``clustering.Clustering``; ``languages`` reads
each set's language from its file name. ``encoders.load_encoder`` reads staticsem, model2vec and Sentence
Transformer models; ``run_tasks`` measures several of them; ``report`` writes tables and plots (per
language: ``report_languages``); ``mteb_adapter`` makes a model an MTEB encoder; ``analysis`` holds the
two analyses of the SWE paper. Needs the ``eval`` extra (scikit-learn, scipy, matplotlib; mteb for the
adapter).
"""

from __future__ import annotations

from staticsem.eval.base import Encoder, Evaluator, NotApplicable
from staticsem.eval.runner import TASK_NAMES, build_tasks, run_tasks

__all__ = ["TASK_NAMES", "Encoder", "Evaluator", "NotApplicable", "build_tasks", "run_tasks"]
