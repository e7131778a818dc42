"""SWE's search rows (``--search-rows``): a second table, distilled for the search modes.

Edit families and the whole-batch term over their pairs buy sentence similarity and cost retrieval: three
seeds of the English recipe, STS mean 73.84 → 75.11 and SciFact nDCG@10 with the search modes 54.28 → 53.42
(studies/README.md §phrases.py). This step distils the same stage 2 on the same sentences as a build without
edits does (no families, no whole-batch term, no neighbour groups, patience 5: ``PLAIN_TRAINING``), and the
model keeps that table as the search modes' rows (``rows.search``, int8 with one scale per row): ``encode``
gets the first table, the search modes the second (SciFact 54.28 again), for one more distillation and
about 1.5× the folder. By default it runs where the build has edit families and no ``--pairs`` (which give
the search modes rows of their own). Light at import (the settings check it); torch loads with the step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from staticsem.distillation.stages.kd_settings import PLAIN_TRAINING
from staticsem.errors import InputError

SEARCH_FOLDER = "stage3-search"


def distils_alone(settings: Any) -> bool:
    """Whether an SWE build's training is the distillation alone (the kd stage and objective)."""
    return settings.objective == "kd" and "kd" in settings.stages


def wants_search_rows(settings: Any) -> bool:
    """Whether an SWE build (``SWESettings``) distils search rows: asked, else where it distils (the kd
    objective alone) with edit families and no ``--pairs``."""
    if settings.search_rows is not None:
        return bool(settings.search_rows)
    return distils_alone(settings) and settings.edits() > 0 and not settings.pairs


def check_search_rows(settings: Any) -> None:
    """Raise ``InputError`` where search rows are asked for and the build cannot make them."""
    if not settings.search_rows:
        return
    if not distils_alone(settings):
        raise InputError("--search-rows distils a second table: it needs the kd stage and --objective kd")
    if settings.pairs:
        raise InputError("--search-rows and --pairs both give the search modes rows of their own: choose one")
    if settings.several_languages():
        raise InputError("--search-rows needs a build of one language (several are aligned after training)")


def with_training(settings: Any) -> Any:
    """``settings`` with the distillation settings left unset chosen for a build with edit families or
    without (``KDSettings.resolved``), and whether it distils search rows."""
    kd = settings.kd.resolved(settings.edits() > 0)
    return replace(settings, kd=kd, search_rows=wants_search_rows(settings))


def search_training(settings: Any) -> Any:
    """The search rows' distillation settings: the build's, as they are without edit families."""
    return replace(settings.kd, **PLAIN_TRAINING, seed=settings.seed, family_share=0.0)


def search_step(pipeline: Any) -> dict[str, Any]:
    """Distil the SWE ``pipeline``'s stage 2 on its sentences without edit families into ``stage3-search``."""
    from staticsem.distillation.stages.kd import Distillation

    s, start = pipeline.settings, pipeline.kd_start()
    sentences, targets = pipeline.kd_targets()
    distillation = Distillation(start, sentences, targets, s.kd.tau, s.kd.center_targets)
    stats = pipeline.train_into("search", SEARCH_FOLDER, start, [distillation], search_training(s))
    return {"objective": "kd", **stats}
