"""SWE's last, optional stage: the distilled model trained on query→passage pairs (``distill --pairs``),
anchored by the build's own teacher targets (``staticsem.distillation.stages.pairs``)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.corpus.exclude import exclusion_prints
from staticsem.distillation.corpus.reading import fingerprint_sources
from staticsem.distillation.methods.swe.settings import SWESettings
from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.io import load


def _training(settings: SWESettings) -> PairsSettings:
    """The pairs training's settings, seeded from the run's seed (what the key and the step both use)."""
    return replace(settings.pairs_training, seed=settings.seed)


def pairs_key(settings: SWESettings, kd_key: str) -> str:
    """The pairs stage's key: the distilled table's, the pairs files, their settings and exclusions."""
    return fingerprint(
        {
            "kd": kd_key,
            "pairs": [p["sha256"] for p in fingerprint_sources(settings.pairs)],
            "settings": asdict(_training(settings)),
            "exclude": exclusion_prints(settings.exclude),
        }
    )


def pairs_step(
    folder: Path,
    source: str,
    settings: SWESettings,
    progress: bool,
    save_every: float = 180.0,
    device: str | None = None,
) -> dict[str, Any]:
    """Train the model in ``source`` (``stage3``, or the aligned one) of the work ``folder`` on the pairs
    into ``stage4`` (its checkpoint saved every ``save_every`` seconds); the record of the step."""
    from staticsem.distillation.corpus.pairs import read_pairs_files
    from staticsem.distillation.stages.pairs import Anchor, train_pairs

    training = _training(settings)
    pairs = read_pairs_files(settings.pairs, settings.exclude, training.per_file or None)
    trained, record = train_pairs(
        load(folder / source),
        pairs,
        training,
        Anchor.from_work(folder),
        folder,
        progress,
        save_every,
        device,
    )
    trained.save(folder / "stage4", dtype="float32")
    return {k: v for k, v in record.items() if k != "settings"}
