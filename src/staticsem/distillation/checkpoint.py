"""Resumable chunked work: each finished chunk is saved atomically, a rerun skips what is done."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from staticsem.io.atomic import atomic_file, save_tensors


def fingerprint(settings: dict[str, Any], items: Sequence[str] = ()) -> str:
    """A short hash of the settings and the items a job works on."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for item in items:
        digest.update(item.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:16]


ANALYSIS_FILE = "analysis.safetensors"  # what ``staticsem analyze`` reads about an SWE model's ABTT


def work_folder(out: Path) -> Path:
    """Where a distillation keeps its resumable work: ``.NAME.work`` beside the output folder."""
    return out.parent / f".{out.name}.work"


class ChunkStore:
    """Folder of safetensors chunks tagged by a fingerprint; a different fingerprint starts afresh."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder = folder
        stamp = folder / "fingerprint.txt"
        if folder.exists() and (not stamp.is_file() or stamp.read_text().strip() != key):
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stamp.write_text(key)

    def path(self, index: int) -> Path:
        """File of chunk ``index``."""
        return self.folder / f"chunk-{index:06d}.safetensors"

    def has(self, index: int) -> bool:
        """True when a previous run finished chunk ``index``."""
        return self.path(index).is_file()

    def compute(self, index: int, make: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The arrays of chunk ``index``, from disk if a previous run finished it."""
        if self.has(index):
            return self.load(index)
        arrays = make()
        self.save(index, arrays)
        return arrays

    def save(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        """Write chunk ``index`` atomically."""
        save_tensors(self.path(index), arrays)

    def load(self, index: int) -> dict[str, np.ndarray]:
        """The arrays of finished chunk ``index``."""
        return load_file(str(self.path(index)))


class Work:
    """The work folder: one JSON record per finished step, tagged with the key of its settings."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def done(self, step: str, key: str) -> dict[str, Any] | None:
        """The record of ``step`` if it finished with the same key."""
        path = self.folder / f"{step}.json"
        if not path.is_file():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        return record if record.get("key") == key else None

    def finish(self, step: str, key: str, record: dict[str, Any]) -> dict[str, Any]:
        """Write the record of ``step`` atomically (this marks it finished)."""
        record = {**record, "key": key}
        with atomic_file(self.folder / f"{step}.json") as tmp:
            tmp.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        return record


def timed(function: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a step and add its wall time in seconds to its record."""
    started = time.perf_counter()
    record = function()
    return {**record, "seconds": round(time.perf_counter() - started, 1)}
