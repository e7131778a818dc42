"""An index folder's ``config.json``: its format version, the model it was built with, its settings."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from staticsem.errors import InputError, ModelFormatError
from staticsem.model import StaticModel
from staticsem.search.common import model_sha256, resolve_model
from staticsem.search.fusion import FusionSettings
from staticsem.search.snapshot import Snapshot
from staticsem.search.vectors import DTYPES, HnswSettings

CONFIG, DATABASE, LEXICAL = "config.json", "docs.sqlite", "lexical"
BM25_COMMON_DF = 1.0  # BM25 leaves out words in more than this share of documents (1.0: exact BM25)
FORMAT, VERSION = "staticsem-index", 2
logger = logging.getLogger(__name__)


def document_mode(static: StaticModel) -> dict[str, Any]:
    """The settings of the model's document mode, with which the index encodes its documents."""
    settings = static.modes.get("document")
    return {} if settings is None else settings.config()


def new_config(
    static: StaticModel,
    model_path: str | None,
    dtype: str,
    hnsw: HnswSettings,
    fusion: FusionSettings,
    bm25_common_df: float,
) -> dict[str, Any]:
    """The config of a new index, its settings checked."""
    if not 0 < bm25_common_df <= 1:
        raise InputError(f"bm25_common_df must be in (0, 1], got {bm25_common_df}")
    if dtype not in DTYPES:
        raise InputError(f"unknown vector dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return {
        "format": FORMAT,
        "version": VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "path": model_path,
            "sha256": model_sha256(static),
            "dim": static.dim,
            "words": len(static),
            "document_mode": document_mode(static),
        },
        "vectors": {"dtype": dtype, **asdict(hnsw)},
        "fusion": fusion.to_dict(),
        "bm25": {"common_df": bm25_common_df},
    }


def read_config(path: Path) -> dict[str, Any]:
    """An index folder's config.json, checked: an index of an earlier format is refused with the fix."""
    from staticsem.io.common import read_json

    if not path.is_dir():
        raise InputError(f"{path}: no index folder here")
    config = read_json(path / CONFIG)
    if config.get("format") != FORMAT:
        raise ModelFormatError(f"{path / CONFIG}: not a staticsem index (format {config.get('format')!r})")
    if config.get("version") != VERSION:
        raise ModelFormatError(
            f"{path}: index format {config.get('version')} (SQLite FTS5, one vector file) is not read by "
            f"this staticsem (format {VERSION}); convert it in place: `staticsem index migrate {path}`"
        )
    for key in ("model", "vectors", "fusion"):
        if not isinstance(config.get(key), dict):
            raise ModelFormatError(f"{path / CONFIG}: {key!r} is missing or not an object")
    return config


def recorded_model(path: Path, config: dict[str, Any], model: StaticModel | str | Path | None) -> StaticModel:
    """The model to search ``path`` with: ``model``, or the one its config names; refused (with the fix)
    when its weights differ from those the index was built with."""
    recorded = config["model"]
    if model is None:
        if not recorded.get("path") or not Path(recorded["path"]).exists():
            raise InputError(
                f"{path}: its model {recorded.get('path')} is missing; give the model it was built with"
            )
        model = recorded["path"]
    static, _ = resolve_model(model)
    sha256 = model_sha256(static)
    if sha256 != recorded["sha256"]:
        raise InputError(
            f"{path} was built with another model ({recorded.get('path')}, sha256 "
            f"{recorded['sha256'][:12]}…); this one has sha256 {sha256[:12]}… — "
            "query with the same model or rebuild the index"
        )
    if document_mode(static) != recorded.get("document_mode", {}):
        logger.warning(
            "%s: its documents were encoded in document mode %s, the model's document mode is now %s: "
            "queries still work, but rebuild the index to encode its documents as the model now would",
            path,
            recorded.get("document_mode", {}),
            document_mode(static),
        )
    return static


def describe(index: Any, snapshot: Snapshot) -> dict[str, Any]:
    """What an open ``Index`` holds (as of ``snapshot``) and how it was built (JSON-serialisable)."""
    total, zero = index.store.counts()
    files = [p for p in index.path.rglob("*") if p.is_file()]
    return {
        "path": str(index.path),
        "format": index.config["version"],
        "documents": total,
        "zero_vectors": zero,
        "vectors": len(snapshot),
        "segments": [
            {"name": s.name, "vectors": len(s), "deleted": len(snapshot.dead.get(s.name, ()))}
            for s in snapshot.segments
        ],
        "buffered": len(snapshot.buffer_keys),
        "lexical_segments": index.lexical.segments(),
        "dim": index.model.dim,
        "dtype": index.dtype,
        "dense_search": "hnsw"
        if any(len(s) > index.hnsw.exact_threshold for s in snapshot.segments)
        else "exact",
        "model": index.config["model"],
        "hnsw": asdict(index.hnsw),
        "fusion": index.fusion.to_dict(),
        "bm25": {"common_df": index.bm25_common_df, "engine": "tantivy"},
        "created": index.config.get("created"),
        "bytes_on_disk": sum(p.stat().st_size for p in files),
    }
