"""X2Static word similarity against corpus size, from the contexts an X2Static build stored.

The X2Static paper gets its advantage over ASE from a full Wikipedia pass. This script shows the trend
on what this machine can afford: it trains X2Static on the first K context chunks (4,096 sentences each)
of an ``x2static`` build's work folder (``methods.py`` leaves ``--models/methods/.x2s-sent-N.work``; a
build still extracting its contexts works too), for each ``K×EPOCHS`` in ``--runs``, with the build's
vocabulary and the paper's settings otherwise. It reports word similarity (Spearman ×100 over the pairs
the model covers; words a small prefix never saw keep their random initial vectors). No teacher pass.

Run::

    python studies/x2static_scaling.py --work benchmarks/.models/methods/.x2s-sent-100000.work \\
        --output studies/results/x2static_scaling.json
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

import _benchmarks  # noqa: F401  (benchmarks/ on the path: _common, teacher_backends)
import _common as common

SETS = ("simlex999", "wordsim353-all", "men3000", "rg65", "mturk287", "mturk771")  # as methods.py


def parse_run(run: str, default_lr: float) -> tuple[int, int, float]:
    """``CHUNKSxEPOCHS[@LR]`` → (chunks, epochs, learning rate)."""
    sizes, _, lr = run.partition("@")
    chunks, epochs = (int(v) for v in sizes.split("x"))
    return chunks, epochs, float(lr) if lr else default_lr


def set_cells(scores: dict[str, float]) -> list[str]:
    """The word-sim mean and each set's score, as table cells."""
    return [f"{scores['mean']:.2f}", *(f"{scores.get(name, float('nan')):.1f}" for name in SETS)]


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--work", type=Path, required=True, help="work folder of a finished x2static build")
    parser.add_argument(
        "--runs",
        default="6x1,12x1,25x1,6x10,12x10,25x10",
        help="CHUNKSxEPOCHS or CHUNKSxEPOCHS@LR (Adam lr, default the paper's 1e-3), comma-separated",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        nargs="*",
        default=[],
        help="model folders scored on the same sets in this run",
    )
    parser.add_argument("--save", type=Path, help="save each run's model to SAVE/<run> (for staticsem eval)")
    args = parser.parse_args()
    from staticsem.distillation.checkpoint import ChunkStore
    from staticsem.distillation.methods.x2static.run import X2StaticSettings, train_x2static
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.eval.wordsim import WordSimilarity
    from staticsem.io import load
    from staticsem.model import StaticModel

    contexts = args.work / "contexts"
    store = ChunkStore(contexts, (contexts / "fingerprint.txt").read_text().strip())
    stored = 0  # the leading chunks on disk: a build still extracting contexts can be measured too
    while store.has(stored):
        stored += 1
    vocab = json.loads((args.work / "vocab.json").read_text())
    counts = np.asarray(vocab["counts"], np.int64)
    width = store.load(0)["contexts"].shape[1]
    # unknown words take their longest known prefix, as in methods.py (the teacher's tokenizer)
    finished = args.work / "x2static"
    tokenizer = load(finished).tokenizer if finished.is_dir() else Teacher().subword_tokenizer
    wordsim = WordSimilarity(args.data, [f"{name}.tsv" for name in SETS])
    default_lr = X2StaticSettings(corpus=("unused",)).lr
    runs = {r.strip(): parse_run(r.strip(), default_lr) for r in args.runs.split(",") if r.strip()}
    for run, (chunks, _, _) in runs.items():
        if not 1 <= chunks <= stored:
            raise SystemExit(f"{run}: the work folder holds {stored} chunks")
    # sentences in the first k chunks, read once for every run
    upto = np.cumsum([len(store.load(i)["lengths"]) for i in range(max(run[0] for run in runs.values()))])
    results: dict[str, dict[str, float]] = {}
    for run, (chunks, epochs, lr) in runs.items():
        settings = X2StaticSettings(corpus=("unused",), epochs=epochs, lr=lr)
        with tempfile.TemporaryDirectory() as tmp:
            table, stats = train_x2static(
                store,
                chunks,
                counts,
                vocab["tokens"],
                width,
                settings,
                Path(tmp) / "state",
                show_progress=False,
            )
        sentences = int(upto[chunks - 1])
        model = StaticModel(vocab["words"], table, tokenizer=tokenizer)
        scores = wordsim(model)
        if args.save:
            model.save(args.save / run.replace("@", "-lr"), dtype="float32")
        results[run] = {"sentences": sentences, "epochs": epochs, "lr": lr, "steps": stats["steps"], **scores}
        results[run]["seconds"] = stats["train_seconds"]
        print(f"{run}: {sentences:,} sentences, word-sim mean {scores['mean']:.2f}", flush=True)
    rows = [
        [
            f"{r['sentences']:,}",
            str(r["epochs"]),
            f"{r['lr']:g}",
            str(r["steps"]),
            *set_cells(r),
            f"{r['seconds']:.0f}",
        ]
        for r in results.values()
    ]
    columns = ["sentences", "epochs", "lr", "steps", "word-sim mean", *SETS, "train s"]
    common.print_table("X2Static (sentence contexts) against corpus size", columns, rows)
    peers = {str(path): wordsim(load(path)) for path in args.compare}
    if peers:
        table = [[path, *set_cells(r)] for path, r in peers.items()]
        common.print_table("Peers in the same run", ["model", "word-sim mean", *SETS], table)
    common.save_json(
        args.output,
        {"benchmark": "x2static_scaling", "work": str(args.work), "results": results, "peers": peers},
    )


if __name__ == "__main__":
    main()
