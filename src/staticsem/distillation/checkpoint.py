"""Resumable chunked work: each finished chunk is saved atomically, a rerun skips what is done."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.io.atomic import atomic_file


def fingerprint(settings: dict[str, Any], items: Sequence[str] = ()) -> str:
    """A short hash of the settings and the items a job works on."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for item in items:
        digest.update(item.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:16]


def work_folder(out: Path) -> Path:
    """Where a distillation keeps its resumable work: ``.NAME.work`` beside the output folder."""
    return out.parent / f".{out.name}.work"


class ChunkStore:
    """Folder of ``.npy`` chunks tagged by a fingerprint; a different fingerprint starts afresh."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = folder
        stamp = folder / "fingerprint.txt"
        if folder.exists() and (not stamp.is_file() or stamp.read_text().strip() != key):
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key)

    def compute(self, index: int, make: Callable[[], np.ndarray]) -> np.ndarray:
        """The array of chunk ``index``, from disk if a previous run finished it."""
        path = self.folder / f"chunk-{index:06d}.npy"
        if path.is_file():
            return np.load(path, allow_pickle=False)
        array = make()
        with atomic_file(path) as tmp, tmp.open("wb") as handle:
            np.save(handle, array, allow_pickle=False)
        return array
