"""SWE's edits step (``--edit-sentences N``): edited copies of the first N short sentences
(``corpus.edits``), their neighbours from the stage-2 table, one teacher pass each; and the families
distillation batches together."""

from __future__ import annotations

from typing import Any

import numpy as np
from safetensors.numpy import load_file

from staticsem.distillation.corpus.edits import edit_families
from staticsem.distillation.methods.swe.targets import sentence_passes
from staticsem.errors import InputError
from staticsem.io.atomic import save_tensors

EDITS_FILE = "edits.safetensors"


def short_of(targets: dict[str, Any]) -> tuple[int, list[str]]:
    """Where the short sentences start in the targets step's list, and those sentences (they come last)."""
    sentences, short = targets["sentences"], targets.get("short", 0)
    return len(sentences) - short, sentences[len(sentences) - short :]


def edit_step(pipeline: Any) -> dict[str, Any]:
    """The edits step of an SWE ``pipeline``: the copies and the teacher's embedding of each."""
    s = pipeline.settings
    first, short = short_of(pipeline.records["targets"])
    seeds = short[: s.edits()]
    copies, families = edit_families(seeds, pipeline._load("stage2"), s.edit, s.seed) if seeds else ([], [])
    if not copies:
        if s.edit.sentences is not None:  # asked for: say why nothing came of it
            raise InputError(f"--edit-sentences: none of {len(seeds):,} short sentences could be edited")
        empty = np.zeros((0, pipeline.teacher.sentence_dim), np.float32)  # the default on a small corpus
        save_tensors(pipeline.work.folder / EDITS_FILE, {"embeddings": empty})
        return {"sentences": [], "families": [], "teacher_passes": 0, "edited": 0}
    partial = pipeline.work.folder / f"edits-{pipeline.keys['edits']}.partial.safetensors"
    result = sentence_passes(pipeline, copies, [], partial)
    save_tensors(pipeline.work.folder / EDITS_FILE, {"embeddings": result.embeddings})
    partial.unlink(missing_ok=True)
    return {
        "sentences": copies,
        "families": [[first + index, count] for index, count in families],
        "teacher_passes": result.passes,
        "edited": len(families),
    }


def with_edits(
    pipeline: Any, sentences: list[str], targets: np.ndarray
) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """The distillation's ``sentences`` and ``targets`` (stage 1's, then the targets step's) with the
    copies appended, and each family as the rows it holds: its sentence's, then its copies'."""
    record = pipeline.records["edits"]
    more = load_file(str(pipeline.work.folder / EDITS_FILE))["embeddings"]
    offset = len(sentences) - len(pipeline.records["targets"]["sentences"])  # stage 1's chosen come first
    families, at = [], len(sentences)
    for index, count in record["families"]:
        families.append(np.array([offset + index, *range(at, at + count)], np.int64))
        at += count
    return [*sentences, *record["sentences"]], np.concatenate([targets, more]), families
