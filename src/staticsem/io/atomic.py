"""Atomic writes: build the output under a temporary name beside it, then rename into place."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from staticsem.errors import InputError

# Files whose presence marks a folder as a model folder we may replace (a config.json alone is too
# common in other folders: replacing such a folder would delete it).
_MODEL_MARKERS = ("modules.json", "model.safetensors")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publish(path: Path) -> None:
    """Give a temporary file (or a folder and its files) the permissions a plain ``open`` would."""
    mask = _umask()
    if path.is_dir():
        os.chmod(path, 0o777 & ~mask)
        for item in path.rglob("*"):
            os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~mask)
    else:
        os.chmod(path, 0o666 & ~mask)


@contextlib.contextmanager
def atomic_file(dest: Path) -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``dest``, on error it is removed.

    :raises InputError: when ``dest`` is a folder.
    """
    dest = Path(dest)
    if dest.is_dir():
        raise InputError(f"{dest} is a folder; give a file name to write to")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        _publish(tmp)
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def write_tensors(path: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` to the safetensors file ``path`` (inside ``atomic_folder``; else ``save_tensors``).

    Every array is made C-contiguous first: safetensors' numpy writer stores any other array's memory as
    it lies, scrambled (a row slice of a Fortran-ordered PCA fit came back wrong that way).
    """
    save_file({name: np.ascontiguousarray(array) for name, array in tensors.items()}, str(path))


def save_tensors(dest: Path, tensors: Mapping[str, np.ndarray]) -> None:
    """Write ``tensors`` to the safetensors file ``dest`` atomically (``write_tensors`` to a temporary)."""
    with atomic_file(dest) as tmp:
        write_tensors(tmp, tensors)


@contextlib.contextmanager
def atomic_folder(dest: Path, markers: Sequence[str] = _MODEL_MARKERS, what: str = "model") -> Iterator[Path]:
    """Yield a temporary folder; on success it replaces ``dest`` (only if that holds one of ``markers``).

    :raises InputError: when ``dest`` is a file, or a non-empty folder that holds no ``what``.
    """
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not any((dest / m).exists() for m in markers):
        raise InputError(f"{dest} is a non-empty folder that holds no {what}; refusing to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        yield tmp
        _publish(tmp)
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
