"""``staticsem train-classifier`` and ``staticsem classify`` (registered in ``staticsem.cli``).

Training imports torch only when it runs; classifying needs numpy only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from staticsem.errors import InputError
from staticsem.io.hub import REVISION_HELP

TRAIN_EPILOG = (
    "Examples: `staticsem train-classifier models/demo --train train.tsv --dev dev.tsv "
    "--out models/sentiment` (label<TAB>text lines);  `staticsem train-classifier models/demo "
    "--train reviews.csv --text-column review --label-column stars --class-weights --out models/stars`;  "
    "`... --multi-label --train tags.jsonl` "
    "(a list of labels per line, or `a,b` in .tsv/.csv)."
)
CLASSIFY_EPILOG = (
    "Examples: `staticsem classify models/sentiment --input texts.txt` (one label per line on stdout);  "
    "`staticsem classify models/sentiment --input texts.txt --output predictions.jsonl` (label and scores)."
)
Column = Annotated[str, typer.Option(help=".csv/.jsonl: the field holding it.")]


def train_classifier(
    model: Annotated[
        Path, typer.Argument(help="The staticsem model whose word table is trained (a path or org/name).")
    ],
    train: Annotated[Path, typer.Option(help="Training examples: .tsv (label<TAB>text), .csv or .jsonl.")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write the classifier to (atomically).")],
    dev: Annotated[
        Path | None, typer.Option(help="Dev examples for early stopping [default: 10 % of --train].")
    ] = None,
    text_column: Column = "text",
    label_column: Column = "label",
    label_separator: Annotated[
        str, typer.Option(help="--multi-label in .tsv/.csv: splits a label cell.")
    ] = ",",
    freeze: Annotated[bool, typer.Option(help="Keep the word table; train the head only.")] = False,
    hidden: Annotated[int, typer.Option(min=0, help="Units of one hidden layer (0: a linear head).")] = 512,
    multi_label: Annotated[bool, typer.Option(help="Any number of labels per text.")] = False,
    class_weights: Annotated[bool, typer.Option(help="Weigh classes by inverse frequency.")] = False,
    epochs: Annotated[int, typer.Option(min=1, help="At most this many epochs.")] = 30,
    patience: Annotated[
        int, typer.Option(min=1, help="Epochs without a better dev score before stopping.")
    ] = 3,
    batch_size: Annotated[int, typer.Option(min=1)] = 32,
    lr: Annotated[float, typer.Option(help="Learning rate of the head.")] = 1e-3,
    table_lr: Annotated[float, typer.Option(help="Learning rate of the word table.")] = 1e-3,
    seed: int = 0,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Train a text classifier on MODEL: the word table (or only a head, --freeze) with early stopping."""
    from staticsem.io import load
    from staticsem.train.classifier import StaticClassifier
    from staticsem.train.data import Columns, read_examples

    columns = Columns(text_column, label_column, label_separator)
    texts, labels = read_examples(train, columns, multi_label)
    dev_set = None if dev is None else read_examples(dev, columns, multi_label)
    classifier = StaticClassifier.fit(
        texts,
        labels,
        load(model, revision=revision),
        dev=dev_set,
        freeze=freeze,
        hidden=hidden,
        multi_label=multi_label,
        class_weights=class_weights,
        epochs=epochs,
        patience=patience,
        batch_size=batch_size,
        lr=lr,
        table_lr=table_lr,
        seed=seed,
        show_progress=progress,
    )
    classifier.save(out)
    meta = classifier.metadata
    typer.echo(
        f"wrote {out}: {len(classifier.classes)} classes, {meta['epochs']} epochs, "
        f"best dev {meta['best_dev']}, {meta['train_seconds']:.1f} s",
        err=True,
    )


def classify(
    classifier: Annotated[Path, typer.Argument(help="A folder written by train-classifier.")],
    input: Annotated[
        str, typer.Option("--input", "-i", help="Text file, one text per line, or - for stdin.")
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="F.jsonl: label and scores per text [default: labels on stdout]."
        ),
    ] = None,
    errors: Annotated[str, typer.Option(help="Non-UTF-8 bytes: strict (error) or replace.")] = "strict",
) -> None:
    """Predict a label for each line of a file (empty lines too)."""
    from staticsem.io.atomic import atomic_file
    from staticsem.lines import Errors, read_lines
    from staticsem.train.classifier import StaticClassifier

    try:
        mode = Errors(errors)
    except ValueError:
        raise InputError(f"--errors must be strict or replace, got {errors!r}") from None
    if output is not None and output.suffix.lower() != ".jsonl":
        raise InputError(f"{output}: --output must end in .jsonl")
    texts = read_lines(input, mode)
    predictions = StaticClassifier.load(classifier).classify(texts)
    if output is None:
        for prediction in predictions:
            label = prediction.label
            typer.echo(label if isinstance(label, str) else ",".join(label))
        return
    with atomic_file(output) as tmp, tmp.open("w", encoding="utf-8") as handle:
        for prediction in predictions:
            handle.write(json.dumps(prediction.to_dict(), ensure_ascii=False) + "\n")
    typer.echo(f"wrote {len(predictions)} predictions to {output}", err=True)
