"""A write that fails partway (the disk fills up) leaves the previous output intact and no temporary file.

Every writer is checked: the model folder (staticsem, model2vec, sentence-transformers), each text
vector format (plain and gzip) and ``staticsem encode``'s .npy and .jsonl outputs. The disk "fills"
after half of what the write needs: files opened for writing raise ``OSError(ENOSPC)`` once that many
bytes went through them, and safetensors (which writes from Rust) is routed through the same files.
"""

from __future__ import annotations

import builtins
import errno
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save as safetensors_bytes
from typer.testing import CliRunner

from staticsem import StaticModel
from staticsem.cli import app
from staticsem.io import export


class Disk:
    """Counts the bytes written through ``open``; raises ENOSPC once more than ``budget`` would pass."""

    def __init__(self) -> None:
        self.budget: int | None = None
        self.written = 0


class FillingFile:
    """A writable file that stops with 'No space left on device' when the disk's budget runs out."""

    def __init__(self, handle: Any, disk: Disk) -> None:
        self._handle, self._disk = handle, disk

    def write(self, data: Any) -> int:
        size = len(memoryview(data).cast("B"))
        disk = self._disk
        if disk.budget is not None and disk.written + size > disk.budget:
            room = disk.budget - disk.written
            self._handle.write(memoryview(data).cast("B")[:room])
            disk.written = disk.budget
            self._handle.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        disk.written += size
        return self._handle.write(data)

    def __enter__(self) -> FillingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@pytest.fixture()
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    """Route every file opened for writing (and every safetensors file) through a ``Disk``."""
    state = Disk()
    real_open = io.open

    def opener(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if not any(flag in mode for flag in "wax+"):
            return handle
        if "b" not in mode:  # text mode: count the encoded bytes by wrapping the binary file
            handle.close()
            raw = FillingFile(real_open(file, mode.replace("t", "") + "b"), state)
            return io.TextIOWrapper(raw, encoding=kwargs.get("encoding"), write_through=True)  # type: ignore[arg-type]
        return FillingFile(handle, state)

    def save_file(tensors: dict[str, np.ndarray], filename: str, metadata: Any = None) -> None:
        with opener(filename, "wb") as handle:
            handle.write(safetensors_bytes(tensors, metadata))

    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(builtins, "open", opener)
    monkeypatch.setattr("staticsem.io.atomic.save_file", save_file)  # write_tensors: every model format
    yield state


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes (temporary files included)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fails_halfway(disk: Disk, folder: Path, write: Callable[[], object]) -> None:
    """Measure what ``write`` needs, then run it with half of that free: it fails and changes nothing."""
    disk.written = 0
    scratch = snapshot(folder)
    assert scratch, "no old output to keep"
    write()  # the size of a complete write...
    needed, disk.written = disk.written, 0
    assert needed > 0
    for name in set(snapshot(folder)) - set(scratch):  # ...then forget it, keeping only the old output
        (folder / name).unlink()
    for name, data in scratch.items():
        (folder / name).write_bytes(data)
    disk.written, disk.budget = 0, needed // 2
    before = snapshot(folder)
    with pytest.raises(OSError, match="No space left"):
        write()
    assert disk.written == needed // 2  # it did fail partway, after writing something
    disk.budget = None
    assert snapshot(folder) == before  # the old output is intact and no temporary file is left


FOLDER_FORMATS = ["staticsem", "model2vec", "sentence-transformers"]
FILE_FORMATS = [
    ("word2vec", "v.txt"),
    ("word2vec-binary", "v.bin"),
    ("glove", "v.glove.txt"),
    ("fasttext", "v.vec"),
    ("fasttext", "v.vec.gz"),
]


@pytest.mark.parametrize("fmt", FOLDER_FORMATS)
def test_failed_folder_save_keeps_the_old_model(
    tiny_model: StaticModel, tmp_path: Path, disk: Disk, fmt: str
) -> None:
    export(tiny_model.truncate(3), tmp_path / "model", fmt)
    fails_halfway(disk, tmp_path, lambda: export(tiny_model, tmp_path / "model", fmt))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_failed_model_save_keeps_the_old_model(
    tiny_model: StaticModel, tmp_path: Path, disk: Disk, dtype: str
) -> None:
    tiny_model.truncate(3).save(tmp_path / "model")
    fails_halfway(disk, tmp_path, lambda: tiny_model.save(tmp_path / "model", dtype=dtype))


@pytest.mark.parametrize(("fmt", "name"), FILE_FORMATS)
def test_failed_vector_file_write_keeps_the_old_file(
    tiny_model: StaticModel, tmp_path: Path, disk: Disk, fmt: str, name: str
) -> None:
    export(tiny_model.truncate(3), tmp_path / name, fmt)
    fails_halfway(disk, tmp_path, lambda: export(tiny_model, tmp_path / name, fmt))


@pytest.mark.parametrize("suffix", [".npy", ".jsonl"])
def test_failed_encode_output_keeps_the_old_file(
    saved_model: Path, tmp_path: Path, disk: Disk, suffix: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    texts = work / "in.txt"
    texts.write_text("the cat sat\na happy dog\n" * 50, encoding="utf-8")
    out = work / f"out{suffix}"
    out.write_bytes(b"precious")

    def encode() -> None:
        result = CliRunner().invoke(app, ["encode", str(saved_model), "-i", str(texts), "-o", str(out)])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == 0, result.stderr

    fails_halfway(disk, work, encode)
    assert out.read_bytes() == b"precious"


def test_save_tensors_keeps_arrays_of_any_memory_order(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from staticsem.io.atomic import save_tensors

    fortran = np.asfortranarray(np.arange(24, dtype=np.float32).reshape(4, 6))
    arrays = {"whole": fortran, "rows": fortran[1:], "columns": fortran[:, ::2], "transposed": fortran.T}
    save_tensors(tmp_path / "t.safetensors", arrays)
    back = load_file(str(tmp_path / "t.safetensors"))
    assert back.keys() == arrays.keys() and all(np.array_equal(back[k], v) for k, v in arrays.items())
    assert [p.name for p in tmp_path.iterdir()] == ["t.safetensors"]  # no temporary file left
