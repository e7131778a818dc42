"""Atomic writes: build the output under a temporary name beside it, then rename into place."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from staticsem.errors import InputError

# Files whose presence marks a folder as a model folder we may replace.
_MODEL_MARKERS = ("config.json", "modules.json", "model.safetensors")


@contextlib.contextmanager
def atomic_file(dest: Path) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``dest``, on error it is removed."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_folder(dest: Path) -> Iterator[Path]:
    """Yield a temporary folder; on success it replaces ``dest`` (only if that is a model folder).

    :raises InputError: when ``dest`` is a file, or a non-empty folder that holds no model.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not any((dest / m).exists() for m in _MODEL_MARKERS):
        raise InputError(f"{dest} is a non-empty folder that holds no model; refusing to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        yield tmp
        old = None
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
            old.rmdir()
            os.replace(dest, old)
        os.replace(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
