"""``staticsem modes``: show or set how ``encode_query`` and ``encode_document`` differ from ``encode``
(registered in ``staticsem.cli``; see ``staticsem.modes``). No retraining: a mode reweights what the model
has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from staticsem.errors import InputError
from staticsem.io.hub import REVISION_HELP

EPILOG = (
    "Examples: `staticsem modes models/demo` (show);  `staticsem modes models/demo --query-piece-weight 1 "
    "--document-piece-weight 1` (unknown words' pieces at full weight for retrieval, the model's own "
    "weight for similarity);  `staticsem modes models/demo --clear` (every mode encodes as encode);  "
    "`staticsem modes org/name --query-piece-weight 1 --out models/copy`."
)
PieceWeight = Annotated[
    float | None,
    typer.Option(
        min=0.0, max=1.0, help="The weight of an unknown word's subword pieces in this mode (0..1)."
    ),
]


def modes(
    model: Annotated[Path, typer.Argument(help="A model (a path or org/name).")],
    query_piece_weight: PieceWeight = None,
    document_piece_weight: PieceWeight = None,
    clear: Annotated[bool, typer.Option(help="Drop the modes' settings first.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write the model with its new modes to this staticsem folder [edit MODEL in place]."
        ),
    ] = None,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Show or set the query and document modes (in place: only config.json is rewritten, atomically)."""
    from staticsem.io import Format, detect, load
    from staticsem.io.common import write_modes
    from staticsem.io.hub import resolve
    from staticsem.modes import describe_modes, modes_config

    path = resolve(model, revision)
    static = load(path)
    weights = {"query": query_piece_weight, "document": document_piece_weight}
    if not clear and out is None and all(weight is None for weight in weights.values()):
        typer.echo(describe_modes(static.modes))
        return
    settings = {} if clear else modes_config(static.modes)
    for mode, weight in weights.items():
        if weight is not None:
            settings[mode] = {**settings.get(mode, {}), "piece_weight": weight}
    changed = static.with_modes(**settings)
    if out is not None:
        changed.save(out, dtype=static.dtype)
    elif not model.exists() or detect(path) is not Format.STATICSEM:
        raise InputError(
            f"{model}: modes are kept in a staticsem folder of your own; write one with --out FOLDER"
        )
    else:
        write_modes(path, changed.modes)
    typer.echo(f"{out or path}: {describe_modes(changed.modes)}", err=True)
