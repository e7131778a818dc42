"""Parallel sentence pairs (``left<TAB>right`` per line, e.g. ``en<TAB>de``) for contrastive training."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Sequence
from pathlib import Path

from staticsem.distillation.corpus.exclude import Exclusion
from staticsem.errors import InputError

logger = logging.getLogger(__name__)


def read_pairs(sources: Sequence[str | Path], exclude: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Both sides of every pair in ``sources`` (``.tsv`` or ``.tsv.gz``), exact duplicates dropped, and
    with ``exclude`` (``--exclude`` files) every pair one of whose sides is listed.

    :raises InputError: for a missing file, a line without exactly two non-empty tab-separated
        fields, text that is not UTF-8, or no pairs at all.
    """
    left: list[str] = []
    right: list[str] = []
    seen: set[tuple[str, str]] = set()
    listed = Exclusion(list(exclude)) if exclude else None
    dropped = 0
    for source in sources:
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: parallel pairs file is missing")
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    raise InputError(f"{path}:{number}: not valid UTF-8") from None
                if not line.strip():
                    continue
                fields = [f.strip() for f in line.split("\t")]
                if len(fields) != 2 or not all(fields):
                    raise InputError(
                        f"{path}:{number}: expected two tab-separated sentences, got {len(fields)} field(s)"
                    )
                pair = (fields[0], fields[1])
                if listed is not None and (pair[0] in listed or pair[1] in listed):
                    dropped += 1
                    continue
                if pair not in seen:
                    seen.add(pair)
                    left.append(pair[0])
                    right.append(pair[1])
    if not left:
        raise InputError(f"no sentence pairs in {', '.join(str(s) for s in sources)}")
    logger.info("read %d sentence pairs (%d dropped: --exclude)", len(left), dropped)
    return left, right
