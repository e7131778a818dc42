"""``staticsem info``: what a model is and how it was made, as facts a person reads (``--json``: the record).

The corpus shows as its names and size, the settings as those that differ from the method's defaults (and,
apart, the auto ones: those whose default, None or auto, leaves them to the run, as resolved or given), the
steps one line each with their time and count. No value is cut short and none shows as JSON; ``--json``
prints the whole record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from staticsem.io.build_facts import corpus_text, license_text, recorded_rows, step_lines
from staticsem.io.hub import REVISION_HELP

if TYPE_CHECKING:
    from staticsem.model import StaticModel

EPILOG = "Examples: `staticsem info models/demo`;  `staticsem info models/demo --json > record.json`"
AUTO = (None, "auto")  # defaults that leave a setting to the run
# metadata shown in rows of their own (or folded into them); every other key shows as it is
SHOWN = ("method", "teacher", "license", "corpus", "settings", "steps", "step_times", "teacher_passes")
FOLDED = ("reference_passes", "runtime", "seconds", "peak_rss_mib", "languages", "pairs")


def info(
    model: Annotated[Path, typer.Argument(help="Model folder or file (or a hub name).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole record (config.json's content) as JSON.")
    ] = False,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Vocabulary size, dimensions, storage, format, languages and how the model was made."""
    from staticsem.io import detect, load
    from staticsem.io.hub import resolve

    folder = resolve(model, revision)
    static = load(folder)
    if as_json:
        config = folder / "config.json"
        record = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else _record(static)
        typer.echo(json.dumps(record, indent=2, ensure_ascii=False))
        return
    files = [folder] if folder.is_file() else [p for p in folder.rglob("*") if p.is_file()]
    table = Table(show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # a long value (a teacher's path) folds: never cut with "…"
    for key, value in [
        ("format", detect(folder).value),
        ("words", f"{len(static):,}"),
        ("dims", str(static.dim)),
        ("dtype", static.dtype),
        ("bytes on disk", f"{sum(p.stat().st_size for p in files):,}"),
        ("subword fallback", _fallback(static)),
        ("phrases", _phrases(static)),
        *facts(static.metadata, static.modes),
    ]:
        table.add_row(key, value)
    Console().print(table)


def _phrases(model: StaticModel) -> str:
    """How many phrases the model has and how a found one counts."""
    found = len(model.phrases)
    if not found:
        return "none"
    how = "beside their words' rows" if model.phrase_mode == "add" else "in place of their words' rows"
    return f"{found:,} ({model.phrase_mode}: each found phrase's row counts {how})"


def _record(model: StaticModel) -> dict[str, Any]:
    """What ``--json`` prints for a model file without config.json (a word2vec or GloVe file)."""
    return {"vocab_size": len(model), "dim": model.dim, "dtype": model.dtype, "metadata": model.metadata}


def facts(metadata: Mapping[str, Any], modes: Any = None) -> Iterator[tuple[str, str]]:
    """The rows ``info`` shows for a model's ``metadata`` (and its search ``modes``)."""
    from staticsem.io.card import languages_text, pairs_text, recorded_languages
    from staticsem.modes import describe_modes

    yield "modes", describe_modes(modes or {})
    yield "languages", languages_text(recorded_languages(dict(metadata))) or "not recorded"
    for key in ("method", "teacher"):
        if metadata.get(key):
            yield key, str(metadata[key])
    if metadata.get("method"):  # made by staticsem: a licence recorded, or unknown
        yield "license", license_text(metadata.get("license"))
    if isinstance(metadata.get("corpus"), list):
        yield "corpus", corpus_text(metadata["corpus"])
    if isinstance(metadata.get("settings"), Mapping):
        changed, chosen = settings_changes(metadata.get("method"), metadata["settings"])
        yield "settings", changes_text(changed) or "the method's defaults"
        if chosen:
            yield "auto settings", changes_text(chosen)
    rows = recorded_rows(metadata)
    if rows:
        yield "steps", "\n".join(step_lines(rows))
    if isinstance(metadata.get("teacher_passes"), int):
        yield "teacher passes", f"{metadata['teacher_passes']:,}"
    if "seconds" in metadata:
        runtime = metadata.get("runtime")
        where = f" on {plain(runtime)}" if isinstance(runtime, Mapping) else ""
        yield "build time", f"{plain(metadata['seconds'])} s{where}"
    if isinstance(metadata.get("peak_rss_mib"), (int, float)):
        yield "peak memory", f"{metadata['peak_rss_mib']:,.0f} MiB"
    if pairs_text(dict(metadata)):
        yield "trained on pairs", str(pairs_text(dict(metadata)))
    for key, value in metadata.items():
        if key not in SHOWN and key not in FOLDED:
            yield key.replace("_", " "), plain(value)


Change = tuple[str, Any, Any]  # a setting's flag, its value and the method's default


def settings_changes(method: Any, recorded: Mapping[str, Any]) -> tuple[list[Change], list[Change]]:
    """``(changed, chosen)``: each setting that differs from ``method``'s default, and each auto one (its
    default, None or auto, leaves it to the run) as resolved or given. Settings no option sets (set by code)
    are left out; for a method staticsem does not know every setting counts as changed (default None)."""
    from staticsem.cli_distill import settings_options
    from staticsem.distillation.methods import get_method
    from staticsem.errors import InputError

    try:
        settings = get_method(str(method)).settings
    except InputError:
        return [(key.replace("_", "-"), value, None) for key, value in recorded.items()], []
    defaults = json.loads(json.dumps(dataclasses.asdict(settings())))
    changed: list[Change] = []
    chosen: list[Change] = []
    for option in settings_options(settings):
        default, value = _at(defaults, option.path), _at(recorded, option.path)
        if value is not _MISSING and value != default:
            (chosen if default in AUTO else changed).append((option.flag, value, default))
    return changed, chosen


def changes_text(changes: list[Change], defaults: bool = False) -> str:
    """``vocab-size 10,000, dim 128`` (``defaults``: ``vocab-size 10,000 (100,000)``; a None default reads
    ``by the run``)."""

    def default(value: Any) -> str:
        return f" ({'by the run' if value is None else plain(value)})" if defaults else ""

    return ", ".join(f"{flag} {plain(value)}{default(was)}" for flag, value, was in changes)


_MISSING = object()


def _at(record: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(record, Mapping) or name not in record:
            return _MISSING
        record = record[name]
    return record


def plain(value: Any) -> str:
    """A value as words: ``10,000``, ``on``, ``a.txt, b.txt``, ``device cpu, workers 2`` (never JSON)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {plain(item)}" for key, item in value.items()) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(item) for item in value) or "none"
    return "none" if value is None else str(value)


def _fallback(model: StaticModel) -> str:
    """How unknown words are looked up: fastText n-grams, a subword prefix, or not at all."""
    if model.ngrams is not None:
        table = model.ngrams
        return f"fastText n-grams ({table.minn}-{table.maxn} chars, {table.buckets:,} buckets)"
    if model.pieces is not None:
        return f"learned subword pieces ({len(model.pieces.vectors):,}, weight k^{model.pieces.weight:g})"
    return "subword prefix" if model.tokenizer is not None else "no"
