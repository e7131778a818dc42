"""How a model was made, as a person reads it: its build's steps as rows (time, what each counted, teacher
passes and sentences/s where there were passes) and its corpus as names and a size.

Plain dicts of config.json in, text out; standard library only. A build writes ``step_rows`` of its step
records into config.json (``step_times``); the end of ``staticsem distill``, ``staticsem info`` and the model
card render those rows (or, for a model saved before, rows made from its ``steps`` records).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# What a step record counts, first found wins (in the record, else in its ``stats`` or ``refine``):
# the key and how it reads. Teacher passes come first: they are what a build's time goes to.
COUNTS = (
    ("teacher_passes", "teacher passes"),
    ("pieces", "teacher passes"),  # each subword piece alone through the teacher
    ("sentences_chosen", "sentences chosen"),
    ("steps", "steps"),
    ("pca_sentences", "sentences"),
    ("sentences", "sentences read"),
)
PASSES = "teacher passes"
HEADER = ("step", "time", "teacher passes", "sentences/s", "counted")


def step_rows(records: Mapping[str, Any], reused: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One row per step record: its time, what it counted, its teacher passes and their rate (``reused``:
    steps this run took from the work folder, their time that of the run that made them)."""
    again = set(reused)
    rows = []
    for step, record in records.items():
        if not isinstance(record, Mapping):
            continue
        seconds = float(record.get("seconds") or 0.0)
        row: dict[str, Any] = {"step": step, "seconds": round(seconds, 1)}
        found = _count(record)
        if found is not None:
            count, counted = found
            if counted == PASSES:
                row["teacher_passes"] = count
                if seconds > 0 and count:
                    row["sentences_per_second"] = round(count / seconds, 1)
            else:
                row["count"], row["counted"] = count, counted
        if step in again:
            row["reused"] = True
        rows.append(row)
    return rows


def _count(record: Mapping[str, Any]) -> tuple[int, str] | None:
    places = [record, *(record[k] for k in ("stats", "refine") if isinstance(record.get(k), Mapping))]
    for key, counted in COUNTS:
        for place in places:
            value = place.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value, counted
    return None


def recorded_rows(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The step rows a model's metadata records, else rows made from its ``steps`` ([] without either)."""
    rows = metadata.get("step_times")
    if isinstance(rows, list) and all(isinstance(row, Mapping) for row in rows):
        return rows
    steps = metadata.get("steps")
    return step_rows(steps) if isinstance(steps, Mapping) else []


def step_cells(row: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """A row's cells under ``HEADER`` (empty where the step had none of it; a reused step says so last)."""
    passes, rate, count = row.get("teacher_passes"), row.get("sentences_per_second"), row.get("count")
    counted = f"{count:,} {row.get('counted', '')}".strip() if isinstance(count, int) else ""
    return (
        str(row.get("step", "")),
        f"{float(row.get('seconds', 0.0)):,.1f} s",
        f"{passes:,}" if isinstance(passes, int) else "",
        f"{rate:,.0f}" if isinstance(rate, (int, float)) else "",
        f"{counted} (reused)".lstrip() if row.get("reused") else counted,
    )


def step_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Each row as one line, its cells aligned: ``extract  25.8 s  11,062 teacher passes at 429/s``."""
    cells = [step_cells(row) for row in rows]
    name = max((len(c[0]) for c in cells), default=0)
    time = max((len(c[1]) for c in cells), default=0)
    lines = []
    for step, seconds, passes, rate, counted in cells:
        what = f"{passes} teacher passes" + (f" at {rate}/s" if rate else "") if passes else ""
        lines.append(f"{step:<{name}}  {seconds:>{time}}  {' '.join(filter(None, (what, counted)))}".rstrip())
    return lines


def steps_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a markdown table (the model card's)."""
    if not rows:
        return []
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(step_cells(row)) + " |" for row in rows]
    return lines


def size_text(size: int) -> str:
    """``35.3 MB`` (decimal units, as disks are sold)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size:,} bytes"


def corpus_text(corpus: list[Any], shown: int = 3) -> str:
    """The corpus as its sources' names (a file's name without its folder, with its language tag) and their
    size: ``embedded (wordnet-base + dict-gcide), 35.3 MB``; past ``shown`` sources, ``and N more``."""
    items = [item for item in corpus if isinstance(item, Mapping)]
    names = []
    for item in items:
        name = str(item.get("source") or item.get("path") or "?").replace("\\", "/").rsplit("/", 1)[-1]
        names.append(f"{item['language']}={name}" if item.get("language") else name)
    text = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
    sizes = [item["bytes"] for item in items if isinstance(item.get("bytes"), int)]
    return f"{text}, {size_text(sum(sizes))}" if sizes else text


def license_text(record: Any, chosen: str | None = None) -> str:
    """The model's licence in words: where it comes from (the build's ``license`` record: set by
    ``--license`` or named by the teacher's model card; ``chosen``: the card's own, where it differs), and
    that the data's terms apply too."""
    known = record.get("id") if isinstance(record, Mapping) else None
    if chosen not in (None, "unknown", known):
        text = f"{chosen}, as set for this model"
    elif known and record.get("source") == "teacher":
        text = f"{known}, as the teacher's model card names it"
    elif known:
        text = f"{known}, as set at the build (--license)"
    else:
        text = "unknown: the build recorded none (--license sets one, else the teacher's model card)"
    return text + "; the terms of the data it was distilled on apply too."
