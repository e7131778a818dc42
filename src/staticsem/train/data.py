"""Labelled examples for classifiers: read ``label<TAB>text``, CSV or JSON-lines files and check the labels.

Numpy-free and torch-free: the CLI, ``fit`` and ``evaluate`` all read and check labels here, so a bad label
is refused with the same one-line message (naming the file and line, or the example number) everywhere.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from staticsem.errors import InputError

Label = str | Sequence[str]


@dataclass(frozen=True)
class Columns:
    """Where texts and labels are in a file: column names for ``.csv``/``.jsonl`` (``.tsv`` is
    ``label<TAB>text`` without a header); ``separator`` splits a multi-label cell (``a,b``)."""

    text: str = "text"
    label: str = "label"
    separator: str = ","


def read_examples(
    path: Path, columns: Columns = Columns(), multi_label: bool = False
) -> tuple[list[str], list[Label]]:
    """Texts and labels of a ``.tsv``, ``.csv`` or ``.jsonl`` file (multi-label: each text's list).

    :raises InputError: for a missing file, another suffix, a malformed row or a bad label (file:line).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: labelled file is missing")
    suffix = path.suffix.lower()
    if suffix not in (".tsv", ".csv", ".jsonl"):
        raise InputError(f"{path}: labelled data must be .tsv (label<TAB>text), .csv or .jsonl")
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not valid UTF-8 (byte offset {exc.start})") from None
    rows = _rows(raw, suffix, path, columns)
    if not rows:
        raise InputError(f"{path}: no examples")
    texts: list[str] = []
    labels: list[Label] = []
    for line, text, label in rows:
        if isinstance(label, str) and multi_label:
            label = [part for part in label.split(columns.separator) if part.strip()]
        checked = _check_label(label, multi_label, f"{path}:{line}")
        labels.append(checked if multi_label else checked[0])
        texts.append(text)
    return texts, labels


def _rows(raw: str, suffix: str, path: Path, columns: Columns) -> list[tuple[int, str, object]]:
    """``(line, text, raw label)`` per example."""
    rows: list[tuple[int, str, object]] = []
    if suffix == ".tsv":
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            label, tab, text = line.partition("\t")
            if not tab:
                raise InputError(f"{path}:{number}: expected label<TAB>text, found no tab")
            rows.append((number, text, label))
    elif suffix == ".csv":
        reader = csv.DictReader(raw.splitlines())
        missing = [c for c in (columns.text, columns.label) if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: no column {missing[0]!r} (header: {reader.fieldnames})")
        for number, record in enumerate(reader, 2):
            rows.append((number, record[columns.text] or "", record[columns.label]))
    else:
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise InputError(f"{path}:{number}: not a JSON line") from None
            if not isinstance(record, dict) or not isinstance(record.get(columns.text), str):
                raise InputError(f"{path}:{number}: no string field {columns.text!r}")
            if columns.label not in record:
                raise InputError(f"{path}:{number}: no field {columns.label!r}")
            rows.append((number, record[columns.text], record[columns.label]))
    return rows


def _check_label(label: object, multi_label: bool, where: str) -> list[str]:
    """One example's labels as a list of non-empty, stripped strings."""
    if multi_label and isinstance(label, (list, tuple)):
        parts = list(label)
    elif isinstance(label, str):
        parts = [label]
    else:
        kind = "a string or a list of strings" if multi_label else "a string"
        raise InputError(f"{where}: label {label!r} is a {type(label).__name__}, not {kind}")
    out: list[str] = []
    for part in parts:
        if not isinstance(part, str) or not part.strip():
            raise InputError(f"{where}: label {part!r} is empty or not a string")
        out.append(part.strip())
    if not out and not multi_label:
        raise InputError(f"{where}: no label")
    return out


def check_labels(labels: Sequence[Label], multi_label: bool, n_texts: int) -> list[list[str]]:
    """Labels given in code (``fit``, ``evaluate``), one per text, checked like a file's.

    :raises InputError: for a count that differs from the texts', or a bad label (naming the example).
    """
    if isinstance(labels, str):
        raise InputError("labels must be a list (one per text), not a single string")
    if len(labels) != n_texts:
        raise InputError(f"{n_texts} texts but {len(labels)} labels")
    return [_check_label(label, multi_label, f"example {i}") for i, label in enumerate(labels)]


def class_list(
    labels: Sequence[Sequence[str]], classes: Sequence[str] | None, multi_label: bool
) -> list[str]:
    """The classes, in a fixed order: ``classes`` as given, else the labels sorted.

    :raises InputError: with fewer than two classes, a given class without a training example, or a
        label outside ``classes``.
    """
    counts = Counter(label for example in labels for label in example)
    if classes is None:
        found = sorted(counts)
    else:
        found = list(classes)
        if len(set(found)) != len(found):
            raise InputError(f"classes hold a duplicate: {found}")
        outside = next((label for label in counts if label not in set(found)), None)
        if outside is not None:
            raise InputError(f"label {outside!r} is not one of the {len(found)} classes {found}")
        empty = next((c for c in found if counts[c] == 0), None)
        if empty is not None:
            raise InputError(f"class {empty!r} has no training examples (of {len(labels)})")
    if len(found) < 2 and not multi_label:
        raise InputError(f"need at least 2 classes to train a classifier, the labels hold {len(found)}")
    if multi_label and not found:
        raise InputError(f"none of the {len(labels)} training examples has a label")
    return found


def check_known(labels: Sequence[Sequence[str]], classes: Sequence[str], what: str) -> None:
    """Refuse labels (of a dev or test set) that the classifier has no class for."""
    known = set(classes)
    for at, example in enumerate(labels):
        for label in example:
            if label not in known:
                raise InputError(
                    f"{what} example {at}: label {label!r} has no training examples "
                    f"(classes: {', '.join(classes)})"
                )
