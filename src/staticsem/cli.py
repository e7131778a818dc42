"""The ``staticsem`` command line: encode, compare, inspect, convert and distil static models."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from staticsem.errors import StaticsemError
from staticsem.io.hub import REVISION_HELP

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    help="Static word embeddings optimised for sentence semantics.",
)
out = Console()
err = Console(stderr=True)
ModelArg = Annotated[
    Path,
    typer.Argument(
        help="Model: staticsem folder, word2vec/GloVe/fastText file, model2vec or sentence-transformers "
        "static folder, or a Hugging Face hub name (org/name; needs staticsem[hub]; a path that exists wins)."
    ),
]
DimOpt = Annotated[int | None, typer.Option(help="Keep only the first DIM dimensions.")]
RevisionOpt = Annotated[str | None, typer.Option(help=REVISION_HELP)]


def _command(
    target: typer.Typer | None = None, *, callback: bool = False, **options: Any
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``target.command`` (default the main app; ``target.callback`` with ``callback``) whose function
    reports ``StaticsemError`` as one line and exit code 2."""

    def register(function: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> None:
            try:
                function(*args, **kwargs)
            except StaticsemError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(2) from None
            except KeyboardInterrupt:
                typer.echo("interrupted; rerun the same command to resume where it stopped", err=True)
                raise typer.Exit(130) from None

        add = (target or app).callback if callback else (target or app).command
        return add(**options)(guarded)

    return register


def _load(path: Path, dim: int | None = None, revision: str | None = None):  # type: ignore[no-untyped-def]
    from staticsem.io import load

    return load(path, dim=dim, revision=revision)


def _folder(model: Path, revision: str | None) -> Path:
    """The local path of MODEL (a hub name is downloaded into the hub's cache)."""
    from staticsem.io.hub import resolve

    return resolve(model, revision)


def _neighbours_table(title: str, rows: list[tuple[str, float]]) -> Table:
    table = Table(title=title)
    table.add_column("word")
    table.add_column("cosine", justify="right")
    for word, score in rows:
        table.add_row(word, f"{score:.3f}")
    return table


@_command(
    epilog="Examples: `staticsem encode models/demo --input texts.txt --output vectors.npy`;  "
    "`staticsem encode models/demo -i queries.txt -o queries.npy --as query`;  "
    "`staticsem encode models/demo --input 'corpus/*.jsonl' --output vectors/ --ray auto` "
    "(Parquet shards of id, vector rows, encoded on a Ray cluster)"
)
def encode(
    model: ModelArg,
    input: Annotated[
        str,
        typer.Option(
            "--input",
            "-i",
            help="Text file, one text per line, or - for stdin; for a folder output: a file or glob of "
            ".txt, .jsonl (.gz) or .parquet files.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="OUT.npy or OUT.jsonl, or a folder (no suffix) of Parquet shards of (id, vector) rows; "
            "written atomically.",
        ),
    ],
    workers: Annotated[int, typer.Option(help="Processes for large inputs (0 = all cores).")] = 1,
    errors: Annotated[str, typer.Option(help="Non-UTF-8 bytes: strict (error) or replace.")] = "strict",
    dim: DimOpt = None,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Folder output: encode with Ray Data on a cluster: auto, local, HOST:PORT or "
            "ray://HOST:PORT (needs staticsem[ray]; every node must see the files, the model and the output)."
        ),
    ] = None,
    ray_workers: Annotated[int | None, typer.Option(help="With --ray: encoders [one per CPU].")] = None,
    text_field: Annotated[
        str, typer.Option(help="Folder output: the text field of .jsonl/.parquet.")
    ] = "text",
    id_field: Annotated[
        str | None, typer.Option(help="Folder output: the id field of .jsonl/.parquet [FILE:ROW].")
    ] = None,
    revision: RevisionOpt = None,
    as_: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="Encode for retrieval as query or document (the model's modes; `staticsem modes`) "
            "[symmetric, for similarity].",
        ),
    ] = None,
) -> None:
    """Encode each line of a file to an L2-normalised vector (empty lines give zero rows)."""
    from staticsem.lines import Errors, read_lines, write_embeddings
    from staticsem.modes import parse_mode

    mode = parse_mode(as_)
    model = _folder(model, revision)
    if ray is not None or not output.suffix:
        if errors != "strict" or workers != 1:
            raise StaticsemError("--errors and --workers are for .npy/.jsonl output; use --ray-workers")
        from staticsem.scale.encode import encode_files

        rows = encode_files(
            model,
            input,
            output,
            ray=ray,
            workers=ray_workers,
            text_field=text_field,
            id_field=id_field,
            dim=dim,
            mode=mode,
        )
        err.print(f"wrote {rows} embeddings to {output}/ (Parquet: id, vector)")
        return
    try:
        handling = Errors(errors)
    except ValueError:
        raise StaticsemError(f"--errors must be strict or replace, got {errors!r}") from None
    texts = read_lines(input, handling)
    static = _load(model, dim).for_mode(mode)
    vectors = static.encode(texts, workers=workers, show_progress=len(texts) > 50_000)
    write_embeddings(vectors, output)
    err.print(f"wrote {len(texts)} × {static.dim} embeddings to {output}")


@_command(epilog='Example: `staticsem similarity models/demo "A cat sleeps." "A kitten naps."`')
def similarity(
    model: ModelArg, text_a: str, text_b: str, dim: DimOpt = None, revision: RevisionOpt = None
) -> None:
    """Cosine similarity of two texts."""
    out.print(f"{_load(model, dim, revision).similarity(text_a, text_b):.4f}")


@_command(epilog="Example: `staticsem neighbors models/demo king -k 5`")
def neighbors(
    model: ModelArg,
    word: str,
    k: Annotated[int, typer.Option("-k", help="How many neighbours.")] = 10,
    dim: DimOpt = None,
    revision: RevisionOpt = None,
) -> None:
    """Nearest words of WORD by cosine similarity."""
    neighbours = _load(model, dim, revision).most_similar(word, k)
    out.print(_neighbours_table(f"neighbours of {word!r}", neighbours))


@_command(epilog="Example: `staticsem analogy models/demo man king woman` (man : king :: woman : ?)")
def analogy(
    model: ModelArg,
    a: str,
    b: str,
    c: str,
    k: Annotated[int, typer.Option("-k", help="How many answers.")] = 5,
    dim: DimOpt = None,
    revision: RevisionOpt = None,
) -> None:
    """A : B :: C : ? by 3CosAdd, the three inputs excluded."""
    answers = _load(model, dim, revision).analogy(a, b, c, k)
    out.print(_neighbours_table(f"{a} : {b} :: {c} : ?", answers))


@_command(epilog="Example: `staticsem convert models/demo demo.vec --to fasttext`")
def convert(
    src: ModelArg,
    dst: Annotated[Path, typer.Argument(help="Output file or folder.")],
    to: Annotated[
        str,
        typer.Option(
            help="staticsem, word2vec, word2vec-binary, glove, fasttext, model2vec, sentence-transformers."
        ),
    ] = "staticsem",
    dtype: Annotated[str, typer.Option(help="staticsem only: float16, float32 or int8.")] = "float16",
    scale: Annotated[str, typer.Option(help="int8 only: per-'row' or per-'model' scale.")] = "row",
    dim: DimOpt = None,
    revision: RevisionOpt = None,
) -> None:
    """Convert a model between formats (the source format is detected)."""
    from staticsem.io import Format, export, parse_format
    from staticsem.quantize import parse_dtype, parse_scale

    fmt = parse_format(to)
    options = {"dtype": parse_dtype(dtype), "scale": parse_scale(scale)} if fmt is Format.STATICSEM else {}
    export(_load(src, dim, revision), dst, fmt, **options)
    err.print(f"wrote {dst} ({fmt.value})")


@_command(
    epilog="Example: `HF_TOKEN=hf_... staticsem push models/mine my-org/mine` (then, anywhere: "
    '`staticsem.load("my-org/mine")`)'
)
def push(
    model: ModelArg,
    repo_id: Annotated[str, typer.Argument(help="Hub repository (org/name); created if it does not exist.")],
    private: Annotated[bool, typer.Option(help="Make the repository private when creating it.")] = False,
    license: Annotated[
        str | None,
        typer.Option(help="License id for the card (e.g. apache-2.0) [the card's own, else unknown]."),
    ] = None,
    revision: RevisionOpt = None,
) -> None:
    """Upload MODEL to the Hugging Face hub with a generated model card (the token comes from HF_TOKEN)."""
    from staticsem.io import push as upload

    url = upload(model, repo_id, private=private, revision=revision, license=license)
    err.print(f"pushed {model} to {url}")


# What a model is and how it was made (staticsem.cli_info).
from staticsem.cli_info import EPILOG as INFO_EPILOG  # noqa: E402
from staticsem.cli_info import info as _info  # noqa: E402

_command(name="info", epilog=INFO_EPILOG)(_info)


# Encoding modes (staticsem.cli_modes).
from staticsem.cli_modes import EPILOG as MODES_EPILOG  # noqa: E402
from staticsem.cli_modes import modes as _modes  # noqa: E402

_command(name="modes", epilog=MODES_EPILOG)(_modes)


# Distillation (staticsem.cli_distill; torch and the teacher load only when a method runs): one
# sub-command per registered method, and the --method form on the group itself.
from staticsem import cli_distill as _distill  # noqa: E402
from staticsem.distillation.methods import methods as _methods  # noqa: E402

distill_app = typer.Typer(rich_markup_mode="markdown")
app.add_typer(distill_app, name="distill")
_command(
    distill_app,
    callback=True,
    invoke_without_command=True,
    epilog=_distill.epilog(),
    help="Distil a static model from a Sentence Transformer (`staticsem distill METHOD`, or `--method`); "
    "rerunning an interrupted command resumes it.",
)(_distill.legacy_command())
for _method in _methods():
    _command(distill_app, name=_method.name, epilog=_distill.epilog(_method))(
        _distill.method_command(_method)
    )


# Evaluation commands (staticsem.eval.cli; heavy imports happen only when they run).
from staticsem.eval.cli import ANALYZE_EPILOG, EVAL_EPILOG  # noqa: E402
from staticsem.eval.cli import analyze as _analyze  # noqa: E402
from staticsem.eval.cli import evaluate as _evaluate  # noqa: E402

_command(name="eval", epilog=EVAL_EPILOG)(_evaluate)
_command(name="analyze", epilog=ANALYZE_EPILOG)(_analyze)


# Search (staticsem.search.cli; usearch, tantivy and SQLite load only when a command runs).
from staticsem.search import cli as _search  # noqa: E402

index_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode="markdown", help="Build and update search indexes."
)
app.add_typer(index_app, name="index")
_command(index_app, name="build", epilog=_search.BUILD_EPILOG)(_search.build)
for _name in ("add", "delete", "info", "optimize", "migrate", "export"):
    _command(index_app, name=_name)(getattr(_search, _name))
_command(name="search", epilog=_search.SEARCH_EPILOG)(_search.search)


# Classifiers (staticsem.cli_train; torch loads only when train-classifier runs).
from staticsem import cli_train as _train  # noqa: E402

_command(name="train-classifier", epilog=_train.TRAIN_EPILOG)(_train.train_classifier)
_command(name="classify", epilog=_train.CLASSIFY_EPILOG)(_train.classify)

# Retrieval training on pairs (staticsem.cli_pairs; torch and tantivy load only when it runs).
from staticsem import cli_pairs as _pairs  # noqa: E402

_command(name="train-pairs", epilog=_pairs.EPILOG)(_pairs.train_pairs)


# The server (staticsem.cli_serve; FastAPI and uvicorn load only when it runs).
from staticsem.cli_serve import EPILOG as SERVE_EPILOG  # noqa: E402
from staticsem.cli_serve import serve as _serve  # noqa: E402

_command(name="serve", epilog=SERVE_EPILOG)(_serve)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2 (usage errors too)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
