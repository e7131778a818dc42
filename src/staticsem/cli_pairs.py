"""``staticsem train-pairs``: fine-tune a model for retrieval on query→passage pairs (``stages.pairs``).

torch and tantivy load only when it runs. The mined negatives and a checkpoint live in ``.OUT.work`` beside
``--out``: rerunning an interrupted command resumes it; the folder goes once the model is written.
"""

from __future__ import annotations

import shutil
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.errors import InputError
from staticsem.io.hub import REVISION_HELP

EPILOG = (
    "Examples: `staticsem train-pairs models/base --pairs squad.tsv.gz --pairs arxiv.tsv.gz --anchor "
    "models/.base.work --exclude eval-sentences.sha1 --out models/search` (the build's own teacher targets "
    "anchor similarity; `distill --keep-work` keeps that folder);  `... --kd-corpus wiki.txt.gz` (the "
    "teacher the model records encodes --pairs-anchor-sentences of it);  `... --pairs-matryoshka 64,128`."
)
PAIRS_HELP = "Lines of query, positive [, negative], tab-separated (.tsv, .tsv.gz); repeatable."
_HELP = {f.name: f.metadata["help"] for f in fields(PairsSettings)}


def train_pairs(
    model: Annotated[Path, typer.Argument(help="The staticsem model to fine-tune (a path or org/name).")],
    pairs: Annotated[list[Path], typer.Option("--pairs", help=PAIRS_HELP)],
    out: Annotated[Path, typer.Option("--out", help="Folder to write the model to (atomically).")],
    anchor: Annotated[
        Path | None, typer.Option(help="The build's work folder: its teacher targets anchor similarity.")
    ] = None,
    kd_corpus: Annotated[
        list[str] | None, typer.Option("--kd-corpus", help="Text whose teacher embeddings anchor similarity.")
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Sentences (or sha1 hashes) no pair or anchor may contain.")
    ] = None,
    batch_size: Annotated[int, typer.Option("--pairs-batch-size", help=_HELP["batch_size"])] = 256,
    lr: Annotated[float, typer.Option("--pairs-lr", help=_HELP["lr"])] = 2e-3,
    tau: Annotated[float, typer.Option("--pairs-tau", help=_HELP["tau"])] = 0.05,
    max_steps: Annotated[int, typer.Option("--pairs-max-steps", help=_HELP["max_steps"])] = 2_000,
    eval_every: Annotated[int, typer.Option("--pairs-eval-every", help=_HELP["eval_every"])] = 100,
    patience: Annotated[int, typer.Option("--pairs-patience", help=_HELP["patience"])] = 5,
    dev_size: Annotated[int, typer.Option("--pairs-dev-size", help=_HELP["dev_size"])] = 2_000,
    mine: Annotated[bool, typer.Option("--pairs-mine/--pairs-no-mine", help=_HELP["hard_negatives"])] = True,
    mine_depth: Annotated[int, typer.Option("--pairs-mine-depth", help=_HELP["mine_depth"])] = 10,
    anchor_weight: Annotated[float, typer.Option("--pairs-anchor-weight", help=_HELP["anchor_weight"])] = 1.0,
    anchor_sentences: Annotated[
        int, typer.Option("--pairs-anchor-sentences", help=_HELP["anchor_sentences"])
    ] = 100_000,
    train_pieces: Annotated[
        bool, typer.Option("--pairs-train-pieces/--pairs-fixed-pieces", help=_HELP["train_pieces"])
    ] = True,
    matryoshka: Annotated[str, typer.Option("--pairs-matryoshka", help=_HELP["matryoshka"])] = "",
    per_file: Annotated[int, typer.Option("--pairs-per-file", help=_HELP["per_file"])] = 0,
    seed: Annotated[int, typer.Option("--seed", help=_HELP["seed"])] = 0,
    keep_work: Annotated[bool, typer.Option(help="Keep .OUT.work (mined negatives) after success.")] = False,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Fine-tune MODEL on query→passage pairs: in-batch and BM25-mined negatives, the teacher as anchor."""
    from staticsem.distillation.checkpoint import work_folder
    from staticsem.distillation.corpus.pairs import read_pairs_files
    from staticsem.distillation.stages.pairs import Anchor, anchor_from_corpus
    from staticsem.distillation.stages.pairs import train_pairs as fit
    from staticsem.io import load

    if anchor is not None and kd_corpus:
        raise InputError("give --anchor (a work folder) or --kd-corpus, not both")
    try:
        dims = tuple(int(d) for d in matryoshka.split(",") if d.strip())
    except ValueError:
        raise InputError(f"--pairs-matryoshka takes comma-separated dimensions, got {matryoshka!r}") from None
    settings = PairsSettings(
        batch_size, lr, tau, max_steps, eval_every, patience, dev_size, mine, mine_depth, anchor_weight,
        anchor_sentences, train_pieces, dims, per_file, seed,
    )  # fmt: skip
    settings.validate()
    data = read_pairs_files(pairs, exclude or (), per_file or None)
    loaded = load(model, revision=revision)
    settings.validate(loaded.dim)
    work = work_folder(out)
    work.mkdir(parents=True, exist_ok=True)
    show = progress
    if anchor is not None:
        anchored: Anchor | None = Anchor.from_work(anchor)
    elif kd_corpus:
        anchored = anchor_from_corpus(loaded, kd_corpus, settings, exclude or (), work, show)
    else:
        anchored = None
    trained, record = fit(loaded, data, settings, anchored, work, show)
    trained.save(out)
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    kept = sum(record["pairs"].values())
    typer.echo(
        f"wrote {out}: {kept} pairs ({record['skipped_unknown']} skipped: unknown words; "
        f"{sum(record['dropped'].values())} dropped: --exclude or duplicates), {record['steps']} steps, "
        f"dev loss {record['dev_loss_start']:.4f} → {record['dev_loss_best']:.4f}, {record['seconds']:.0f} s",
        err=True,
    )
