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
from staticsem.distillation.teachers.device import DEVICE_HELP
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
_DEFAULT = PairsSettings()  # the options' defaults are the settings' own


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
    batch_size: Annotated[
        int, typer.Option("--pairs-batch-size", help=_HELP["batch_size"])
    ] = _DEFAULT.batch_size,
    lr: Annotated[float, typer.Option("--pairs-lr", help=_HELP["lr"])] = _DEFAULT.lr,
    tau: Annotated[float, typer.Option("--pairs-tau", help=_HELP["tau"])] = _DEFAULT.tau,
    max_steps: Annotated[
        int, typer.Option("--pairs-max-steps", help=_HELP["max_steps"])
    ] = _DEFAULT.max_steps,
    eval_every: Annotated[
        int, typer.Option("--pairs-eval-every", help=_HELP["eval_every"])
    ] = _DEFAULT.eval_every,
    patience: Annotated[int, typer.Option("--pairs-patience", help=_HELP["patience"])] = _DEFAULT.patience,
    dev_size: Annotated[int, typer.Option("--pairs-dev-size", help=_HELP["dev_size"])] = _DEFAULT.dev_size,
    mine: Annotated[
        bool, typer.Option("--pairs-mine/--pairs-no-mine", help=_HELP["hard_negatives"])
    ] = _DEFAULT.hard_negatives,
    mine_depth: Annotated[
        int, typer.Option("--pairs-mine-depth", help=_HELP["mine_depth"])
    ] = _DEFAULT.mine_depth,
    anchor_weight: Annotated[
        float, typer.Option("--pairs-anchor-weight", help=_HELP["anchor_weight"])
    ] = _DEFAULT.anchor_weight,
    anchor_sentences: Annotated[
        int, typer.Option("--pairs-anchor-sentences", help=_HELP["anchor_sentences"])
    ] = _DEFAULT.anchor_sentences,
    train_pieces: Annotated[
        bool, typer.Option("--pairs-train-pieces/--pairs-fixed-pieces", help=_HELP["train_pieces"])
    ] = _DEFAULT.train_pieces,
    matryoshka: Annotated[str, typer.Option("--pairs-matryoshka", help=_HELP["matryoshka"])] = "",
    per_file: Annotated[int, typer.Option("--pairs-per-file", help=_HELP["per_file"])] = _DEFAULT.per_file,
    into: Annotated[str, typer.Option("--pairs-into", help=_HELP["into"])] = _DEFAULT.into,
    seed: Annotated[int, typer.Option(help="Seed of the split, the batches and the mining.")] = _DEFAULT.seed,
    keep_work: Annotated[bool, typer.Option(help="Keep .OUT.work (mined negatives) after success.")] = False,
    device: Annotated[str, typer.Option(help=DEVICE_HELP)] = "auto",
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Fine-tune MODEL on query→passage pairs: in-batch and BM25-mined negatives, the teacher as anchor."""
    from staticsem.distillation.checkpoint import work_folder
    from staticsem.distillation.corpus.pairs import read_pairs_files
    from staticsem.distillation.stages.pairs import Anchor, anchor_from_corpus
    from staticsem.distillation.stages.pairs import train_pairs as fit
    from staticsem.distillation.teachers.device import resolve_device
    from staticsem.io import load
    from staticsem.io.card import refresh

    if anchor is not None and kd_corpus:
        raise InputError("give --anchor (a work folder) or --kd-corpus, not both")
    where = resolve_device(device)  # CUDA without a GPU: one line, before any reading
    settings = PairsSettings(  # the settings turn --pairs-matryoshka's items into ints (or say why not)
        batch_size=batch_size,
        lr=lr,
        tau=tau,
        max_steps=max_steps,
        eval_every=eval_every,
        patience=patience,
        dev_size=dev_size,
        hard_negatives=mine,
        mine_depth=mine_depth,
        anchor_weight=anchor_weight,
        anchor_sentences=anchor_sentences,
        train_pieces=train_pieces,
        matryoshka=tuple(d.strip() for d in matryoshka.split(",") if d.strip()),  # type: ignore[misc]
        per_file=per_file,
        into=into,
        seed=seed,
    )
    settings.validate()
    data = read_pairs_files(pairs, exclude or (), per_file or None)
    loaded = load(model, revision=revision)
    settings.validate(loaded.dim)
    work = work_folder(out)
    work.mkdir(parents=True, exist_ok=True)
    if anchor is not None:
        anchored: Anchor | None = Anchor.from_work(anchor)
    elif kd_corpus:
        anchored = anchor_from_corpus(loaded, kd_corpus, settings, exclude or (), work, progress, where)
    else:
        anchored = None
    trained, record = fit(loaded, data, settings, anchored, work, progress, device=where)
    trained.save(out)
    refresh(out)  # README.md: the modes and the pairs training beside how the model was made
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    kept = sum(record["pairs"].values())
    start, best = record["dev_loss_start"], record["dev_loss_best"]
    loss = "no dev split: the last table" if start is None else f"dev loss {start:.4f} → {best:.4f}"
    typer.echo(
        f"wrote {out}: {kept} pairs ({record['skipped_unknown']} skipped: unknown words; "
        f"{sum(record['dropped'].values())} dropped: --exclude or duplicates), {record['steps']} steps, "
        f"{loss}, {record['seconds']:.0f} s",
        err=True,
    )
