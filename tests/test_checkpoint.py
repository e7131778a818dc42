"""The work folder's resumable pieces (``distillation.checkpoint``): a finished step or chunk is reused only
under the key it was made with."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from staticsem.distillation.checkpoint import ChunkStore, Work


def test_chunks_made_under_another_key_are_dropped_not_reused(tmp_path: Path) -> None:
    first = ChunkStore(tmp_path / "chunks", "key a")
    first.save(0, {"x": np.arange(3)})
    assert ChunkStore(tmp_path / "chunks", "key a").has(0)  # the same key: reused
    other = ChunkStore(tmp_path / "chunks", "key b")
    assert not other.has(0)
    calls = []
    got = other.compute(0, lambda: calls.append(1) or {"x": np.arange(5)})
    assert calls == [1] and got["x"].tolist() == [0, 1, 2, 3, 4]
    assert not ChunkStore(tmp_path / "chunks", "key a").has(0)  # key b's chunk is not key a's either


def test_a_step_finished_under_another_key_is_not_done(tmp_path: Path) -> None:
    work = Work(tmp_path / "work")
    work.finish("vocab", "key a", {"words": ["cat"]})
    assert work.done("vocab", "key a") == {"words": ["cat"], "key": "key a"}
    assert work.done("vocab", "key b") is None
    assert work.done("select", "key a") is None
