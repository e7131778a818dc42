"""How ``staticsem distill --help`` reads: options in panels by purpose, the everyday ones shown first, every
other one a ``--help-all`` away.

Each flag's panel comes from ``PLACES`` (by flag, else by its first word: ``kd-*``, ``pairs-*``...); a flag
neither names (a new setting, another package's method) shows in the model's panel, so no option is ever
hidden by accident. ``--help`` shows the flags of ``CORE`` and ``EVERYDAY``; ``--help-all`` shows them all.
"""

from __future__ import annotations

import inspect
import typing
from typing import Annotated, Any

import typer
from typer.core import TyperOption

CORPUS, TEACHER, MODEL, LANGUAGES, SEARCH, TRAINING, RESOURCES = (
    "The corpus",
    "The teacher",
    "The model",
    "Languages",
    "Search modes and pairs",
    "Training",
    "Resources",
)
PANELS = (CORPUS, TEACHER, MODEL, LANGUAGES, SEARCH, TRAINING, RESOURCES)  # the order help shows them in

CORE = ("corpus", "teacher", "out", "vocab-size", "device")  # first in their panels, in every form
# shown beside CORE by a method's own --help (the --method form, every method's options at once, shows
# CORE and --method alone)
EVERYDAY = frozenset(
    {
        *("method", "max-sentences", "exclude", "sentences-per-word", "min-count", "prompt"),
        *("dim", "dtype", "fallback", "phrases", "phrases-from", "languages", "pairs", "objective"),
        *("parallel", "kd-max-steps", "edit-sentences", "workers", "ray", "keep-work"),
        # the small methods' own knobs: word2vec, fastText, GloVe, token, X2Static
        *("window", "epochs", "skip-gram", "negative", "minn", "maxn", "sif", "context"),
    }
)

FLAGS = {  # the flags of each panel (a first word such as kd stands for kd-*); the rest: the model's
    CORPUS: (
        *("corpus", "max-sentences", "min-words", "max-words", "exclude", "lowercase", "context"),
        *("paragraph-words", "sentences-per-word", "rare-after", "sentences-per-rare-word"),
        "select-threshold",
    ),
    TEACHER: ("teacher", "device", "layer", "prompt", "trust-remote-code"),
    LANGUAGES: ("languages", "splitter", "vocab-split", "hand-over", "check-tokenizer", "align"),
    SEARCH: ("search-piece-weight", "pairs"),
    TRAINING: (
        *("objective", "parallel", "kd", "edit", "lr", "epochs", "negatives", "subsample", "x-max", "alpha"),
        *("window", "negative", "sample", "skip-gram"),
    ),
    RESOURCES: (
        *("workers", "ray", "keep-work", "threads", "batch-size", "batch-tokens", "teacher-batch"),
        *("chunk-sentences", "max-pairs"),
    ),
}
PLACES = {flag: panel for panel, flags in FLAGS.items() for flag in flags}


def place(flag: str) -> str:
    """The panel of ``flag`` (``PLACES`` by the flag, else by its first word; else the model's)."""
    return PLACES.get(flag) or PLACES.get(flag.split("-")[0]) or MODEL


def option(names: str, flag: str, help: str, *, core_only: bool = False) -> Any:
    """``typer.Option(names)`` in the panel of ``flag``, hidden from ``--help`` unless everyday
    (``core_only``: unless in ``CORE``, for the ``--method`` form)."""
    shown = flag in CORE or flag == "method" or (flag in EVERYDAY and not core_only)
    return typer.Option(names, help=help, rich_help_panel=place(flag), hidden=not shown)


def arranged(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """``parameters`` in the panels' order, ``CORE`` first within each (in its order; the rest as given)."""

    def rank(parameter: inspect.Parameter) -> tuple[int, int]:
        args = typing.get_args(parameter.annotation)
        panel = getattr(args[1], "rich_help_panel", None) if len(args) > 1 else None
        flag = "out" if parameter.name == "out_dir" else parameter.name.replace("_", "-")
        first = CORE.index(flag) if flag in CORE else len(CORE)
        return (PANELS.index(panel) if panel in PANELS else -1, first)

    return sorted(parameters, key=rank)


def _show_all(ctx: typer.Context, _: typer.CallbackParam, value: bool) -> None:
    """``--help-all``: the help with every option shown, then exit. A flag's ``--no-`` form moves into its
    help text, so the names fit whole in 80 columns (typer builds the command afresh for each run: nothing
    stays changed)."""
    if not value or ctx.resilient_parsing:
        return
    for parameter in ctx.command.params:
        if isinstance(parameter, TyperOption):
            parameter.hidden = False
            if parameter.secondary_opts:
                parameter.help = f"{parameter.help} (off: {', '.join(parameter.secondary_opts)})"
                parameter.secondary_opts = []
    typer.echo(ctx.get_help(), nl=False)
    ctx.exit()


def help_all(count: int) -> inspect.Parameter:
    """The ``--help-all`` option of a command with ``count`` options."""
    info = typer.Option(
        "--help-all",
        help=f"Show all {count} options (--help shows the everyday ones) and exit.",
        is_eager=True,
        expose_value=False,
        callback=_show_all,
    )
    return inspect.Parameter(
        "help_all", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, info]
    )
