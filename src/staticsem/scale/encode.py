"""Bulk encoding of text, JSON-lines and Parquet files into Parquet shards of (id, vector) rows.

The same reader and encoder run in one process or on a Ray cluster (Ray Data reads the files, encodes in
``map_batches`` with the model loaded once per worker, and writes the shards), so both give the same rows.
A row's id is ``FILE:N`` (FILE relative to the files' common folder, N its line or row number from 1) or,
with ``id_field``, that field of the record. Empty lines give zero vectors, as in ``StaticModel.encode``.
"""

from __future__ import annotations

import glob
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError
from staticsem.io.atomic import atomic_file, atomic_folder
from staticsem.lines import decode_lines, json_record
from staticsem.scale.cluster import connect, require_ray

FORMATS = (".txt", ".txt.gz", ".jsonl", ".jsonl.gz", ".parquet")
BLOCK_ROWS = 8192
MARKER = "_staticsem.json"  # marks the folder as ours to replace; Parquet readers skip "_" files


def _arrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise InputError("Parquet output needs pyarrow: pip install 'staticsem[ray]'") from None
    return pyarrow


def matched_files(pattern: str) -> list[Path]:
    """Files matching ``pattern`` (a path or glob, ``**`` allowed), sorted; every one of a known format."""
    files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not files:
        raise InputError(f"{pattern}: no input file matches")
    for path in files:
        if not path.name.endswith(FORMATS):
            raise InputError(f"{path}: input must be one of {', '.join(FORMATS)}")
    return files


def read_file(
    handle: Any, name: str, text_field: str = "text", id_field: str | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """(ids, texts) blocks of one decompressed input stream; ``name`` is the file's id prefix."""
    if name.endswith(".parquet"):
        pa = _arrow()
        table = pa.parquet.ParquetFile(pa.BufferReader(handle.read()))
        columns = [text_field] + ([id_field] if id_field else [])
        missing = [c for c in columns if c not in table.schema_arrow.names]
        if missing:
            raise InputError(f"{name}: no column {missing[0]!r}")
        first = 1
        for batch in table.iter_batches(BLOCK_ROWS, columns=columns):
            found = [t or "" for t in batch.column(text_field).to_pylist()]
            keys = batch.column(id_field).to_pylist() if id_field else range(first, first + len(found))
            yield [str(k) if id_field else f"{name}:{k}" for k in keys], found
            first += len(found)
        return
    lines = decode_lines(io.BufferedReader(handle, 1 << 20), name)
    jsonl = ".jsonl" in name
    ids: list[str] = []
    texts: list[str] = []
    for number, line in enumerate(lines, start=1):
        key = f"{name}:{number}"
        if jsonl:
            if not line.strip():
                continue
            record = json_record(line, text_field, key)
            if id_field and id_field not in record:
                raise InputError(f"{key}: no field {id_field!r}")
            key, line = (str(record[id_field]) if id_field else key), record[text_field]
        ids.append(key)
        texts.append(line)
        if len(texts) == BLOCK_ROWS:
            yield ids, texts
            ids, texts = [], []
    if texts:
        yield ids, texts


def to_table(ids: list[str], vectors: np.ndarray) -> Any:
    """A pyarrow table of ``id`` (string) and ``vector`` (fixed-size list of float32)."""
    pa = _arrow()
    flat = pa.array(np.ascontiguousarray(vectors, np.float32).reshape(-1))
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
    )


class Encoder:
    """Loads the model once (per Ray worker) and encodes blocks of ``id``/``text`` rows."""

    def __init__(self, model: str, dim: int | None = None, mode: str | None = None) -> None:
        from staticsem.io import load

        self.model = load(model, dim=dim).for_mode(mode)

    def __call__(self, batch: Any) -> Any:
        texts = batch.column("text").to_pylist()
        return to_table(batch.column("id").to_pylist(), self.model.encode(texts))


def _datasource(files: list[Path], root: str, text_field: str, id_field: str | None) -> Any:
    """A Ray Data source reading ``files`` with ``read_file`` (one read task per file)."""
    from ray.data.datasource import FileBasedDatasource

    class Files(FileBasedDatasource):  # type: ignore[misc]
        def _read_stream(self, f: Any, path: str) -> Iterator[Any]:
            pa = _arrow()
            name = os.path.relpath(path, root)
            for ids, texts in read_file(f, name, text_field, id_field):
                yield pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())})

    return Files([str(p.resolve()) for p in files])


def encode_files(
    model: str | Path,
    pattern: str,
    output: str | Path,
    *,
    ray: str | None = None,
    workers: int | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    dim: int | None = None,
    batch_size: int = 4096,
    show_progress: bool = True,
    mode: str | None = None,
) -> int:
    """Encode every text of the files matching ``pattern`` into Parquet shards in the folder ``output``.

    :param mode: encode as ``query`` or ``document`` (``StaticModel.for_mode``) [as ``encode``].
    :param ray: run on this Ray cluster (``auto``, ``local``, ``HOST:PORT``...) with ``workers`` encoders
        [one per CPU]; every node must see the input files, the model and the output folder.
    :returns: the number of rows written.
    """
    files = matched_files(pattern)
    root = os.path.commonpath([str(p.resolve().parent) for p in files])
    output = Path(output)
    with atomic_folder(output, markers=(MARKER,), what="staticsem encode output") as tmp:
        if ray is None:
            rows = _encode_here(
                str(model), files, root, tmp, text_field, id_field, dim, mode, batch_size, show_progress
            )
        else:
            rows = _encode_on_ray(
                str(model), files, root, tmp, ray, workers, text_field, id_field, dim, mode, batch_size
            )
        record = {
            "model": str(model),
            "files": len(files),
            "rows": rows,
            "ray": ray,
            "mode": mode,
            "columns": ["id", "vector"],
        }
        (tmp / MARKER).write_text(json.dumps(record) + "\n", encoding="utf-8")
    return rows


def _encode_here(
    model: str,
    files: list[Path],
    root: str,
    out: Path,
    text_field: str,
    id_field: str | None,
    dim: int | None,
    mode: str | None,
    batch_size: int,
    show_progress: bool,
) -> int:
    """One process: a shard per input file."""
    from tqdm.auto import tqdm

    pa = _arrow()
    encoder, rows = Encoder(model, dim, mode), 0
    schema = to_table([], np.zeros((0, encoder.model.dim), np.float32)).schema
    progress = tqdm(desc="encoding", unit=" text", disable=not show_progress, mininterval=2)
    for number, path in enumerate(files):
        name = os.path.relpath(path.resolve(), root)
        with (
            pa.input_stream(str(path), compression="detect") as handle,
            atomic_file(out / f"part-{number:05d}.parquet") as target,
            pa.parquet.ParquetWriter(str(target), schema) as writer,
        ):
            for ids, texts in read_file(handle, name, text_field, id_field):
                for start in range(0, len(texts), batch_size):
                    block = slice(start, start + batch_size)
                    writer.write_table(encoder(pa.table({"id": ids[block], "text": texts[block]})))
                    rows += len(texts[block])
                    progress.update(len(texts[block]))
    progress.close()
    return rows


def _encode_on_ray(
    model: str,
    files: list[Path],
    root: str,
    out: Path,
    address: str,
    workers: int | None,
    text_field: str,
    id_field: str | None,
    dim: int | None,
    mode: str | None,
    batch_size: int,
) -> int:
    """Ray Data: read tasks per file, ``map_batches`` with an ``Encoder`` per worker, Parquet shards."""
    require_ray()
    connect(address)
    import ray
    import ray.data

    if workers is not None and workers < 1:
        raise InputError(f"--ray-workers must be positive, got {workers}")
    encoders = workers or max(int(ray.cluster_resources().get("CPU", 1)), 1)
    dataset = ray.data.read_datasource(_datasource(files, root, text_field, id_field)).map_batches(
        Encoder,
        fn_constructor_args=(model, dim, mode),
        batch_format="pyarrow",
        batch_size=batch_size,
        concurrency=(1, encoders),  # a fixed pool would hold every CPU and starve the read tasks
        num_cpus=1,
    )
    dataset.write_parquet(str(out))
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in out.glob("*.parquet"))
