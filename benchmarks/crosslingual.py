"""Cross-lingual English–German static models (METHOD.md §1, stage 3b) against their teacher, in one run.

Teacher: a multilingual Sentence Transformer folder (``--teacher``; e.g. multilingual-e5-small built by
``../shared/tools/multilingual-teacher/``), used with its ``query`` prompt. Data from ``--data``:

* English corpus: the first ``--sentences`` Wikipedia lines plus the English side of the training pairs;
  German corpus: the German side of the training pairs (``parallel/en-de-train-all.tsv``).
* Held out from training: every pair whose English side is an STS-B dev sentence or whose sides are in
  the Tatoeba test set. Cross-lingual STS (``xsts/stsb-dev-en-de.tsv``) pairs each STS-B dev first
  sentence with the German translation of its second sentence, taken from those held-out pairs.

Models (256 dims; stage 1 per language is computed once and shared): the English-only SWE pipeline
(knowledge distillation, and its PCA stage alone), and the cross-lingual model after PCA alone, with
knowledge distillation, with contrastive learning on the pairs, and with both. Measured: STS-B dev
(English), cross-lingual STS-B dev (en–de), Tatoeba deu–eng top-1 in both directions, cost.

Run::

    python benchmarks/crosslingual.py --teacher /work/teachers/me5-small \\
        --output benchmarks/results/crosslingual.json
"""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from typing import Any

import _common as common

PAIRS = "parallel/en-de-train-all.tsv"
TATOEBA = "parallel/tatoeba-laser-deu-eng.tsv"
TEACHER = "teacher"


def read_tsv(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def prepare(args: Any) -> tuple[Path, Path, Path, Path]:
    """Corpora, training pairs and an evaluation folder (sts/, xsts/, parallel/) under ``--models``."""
    folder = args.models / "crosslingual"
    en, de, pairs = folder / f"en-{args.sentences}.txt", folder / "de.txt", folder / "pairs-train.tsv"
    data = folder / "data"
    if all(p.is_file() for p in (en, de, pairs, data / "xsts" / "stsb-dev-en-de.tsv")):
        return en, de, pairs, data
    stsb = read_tsv(args.data / common.STSB_DEV)
    tatoeba = read_tsv(args.data / TATOEBA)
    train = read_tsv(args.data / PAIRS)
    german = {e: g for e, g in train}
    held_en = {s for _, a, b in stsb for s in (a, b)} | {e for e, _ in tatoeba}
    held_de = {g for _, g in tatoeba} | {german[s] for s in held_en if s in german}
    kept = [(e, g) for e, g in train if e not in held_en and g not in held_de]
    xsts = [(score, a, german[b]) for score, a, b in stsb if b in german]
    with gzip.open(args.data / common.CORPUS, "rt", encoding="utf-8") as handle:
        wiki = [line for _, line in zip(range(args.sentences), handle, strict=False)]
    common.write_text_atomic(en, "".join(wiki) + "".join(f"{e}\n" for e, _ in kept))
    common.write_text_atomic(de, "".join(f"{g}\n" for _, g in kept))
    common.write_text_atomic(pairs, "".join(f"{e}\t{g}\n" for e, g in kept))
    common.write_text_atomic(data / "xsts" / "stsb-dev-en-de.tsv", "".join("\t".join(r) + "\n" for r in xsts))
    for source, link in ((common.STSB_DEV, "sts/stsb-dev.tsv"), (TATOEBA, f"parallel/{Path(TATOEBA).name}")):
        (data / link).parent.mkdir(parents=True, exist_ok=True)
        if not (data / link).exists():
            os.symlink((args.data / source).resolve(), data / link)
    print(
        f"training pairs: {len(kept):,} of {len(train):,} (held out: STS-B dev, Tatoeba); "
        f"cross-lingual STS pairs: {len(xsts):,} of {len(stsb):,}",
        flush=True,
    )
    return en, de, pairs, data


def builds(args: Any, en: Path, de: Path, pairs: Path) -> dict[str, dict[str, Any]]:
    """Label → distill() options of every model."""
    work = args.models / "crosslingual" / ".work"
    both = {"corpus": [f"en={en}", f"de={de}"], "work_dir": work}
    return {
        "English-only SWE (kd)": {"corpus": [str(en)], "work_dir": work / "en"},
        "English-only, PCA only": {
            "corpus": [str(en)],
            "work_dir": work / "en",
            "stages": ("extract", "pca"),
        },
        "cross-lingual, PCA only": {**both, "stages": ("extract", "pca")},
        "cross-lingual + kd": both,
        "cross-lingual + contrastive": {**both, "objective": "contrastive", "parallel": [pairs]},
        "cross-lingual + kd + contrastive": {**both, "objective": "both", "parallel": [pairs]},
    }


def build(args: Any, label: str, options: dict[str, Any]) -> Path:
    """Build (or reuse) one model."""
    return common.distill_cached(
        args.models / "crosslingual" / common.slug(label),
        label,
        args.rebuild,
        "swe",
        teacher=str(args.teacher),
        prompt=args.prompt,
        vocab_size=args.vocab_size,
        min_count=args.min_count,
        sentences_per_word=args.sentences_per_word,
        dim=args.dim,
        **options,
    )


def evaluate(encoders: dict[str, Any], data: Path) -> dict[str, dict[str, float]]:
    from staticsem.eval.bitext import BitextRetrieval
    from staticsem.eval.sts import STS, CrossLingualSTS

    tasks = {
        "sts": STS(data, ("stsb-dev.tsv",)),
        "xsts": CrossLingualSTS(data),
        "bitext": BitextRetrieval(data),
    }
    results: dict[str, dict[str, float]] = {}
    for label, encoder in encoders.items():
        started = time.perf_counter()
        results[label] = {f"{p}:{k}": v for p, task in tasks.items() for k, v in task(encoder).items()}
        print(f"evaluated {label} in {time.perf_counter() - started:.0f} s", flush=True)
    return results


def report(results: dict[str, dict[str, float]], metas: dict[str, dict[str, Any]]) -> None:
    teacher, english = results[TEACHER], results.get("English-only SWE (kd)", {})
    stem = Path(TATOEBA).stem
    rows = []
    for label, r in results.items():
        meta = metas.get(label, {})
        seconds = meta.get("seconds")
        rows.append(
            [
                label,
                f"{meta.get('words', '')}",
                f"{r['sts:stsb-dev']:.2f}",
                f"{100 * r['sts:stsb-dev'] / english['sts:stsb-dev']:.1f} %" if english else "—",
                f"{r['xsts:mean']:.2f}",
                f"{r[f'bitext:{stem}/right-left']:.1f}",
                f"{r[f'bitext:{stem}/left-right']:.1f}",
                f"{r[f'bitext:{stem}']:.1f}",
                f"{100 * r[f'bitext:{stem}'] / teacher[f'bitext:{stem}']:.1f} %",
                "—" if seconds is None else f"{seconds / 60:.1f}",
                f"{meta['teacher_passes']:,}" if "teacher_passes" in meta else "—",
            ]
        )
    common.print_table(
        "English–German static models (Spearman / top-1 accuracy × 100; build minutes on this machine)",
        [
            "model",
            "words",
            "STS-B dev",
            "of English-only",
            "xSTS en-de",
            "Tatoeba de→en",
            "Tatoeba en→de",
            "Tatoeba mean",
            "of teacher",
            "build min",
            "teacher passes",
        ],
        rows,
    )


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument(
        "--teacher", type=Path, required=True, help="multilingual Sentence Transformer folder"
    )
    parser.add_argument("--prompt", default="query", help="teacher prompt name or text ('' for none)")
    parser.add_argument(
        "--sentences", type=int, default=100_000, help="Wikipedia lines in the English corpus"
    )
    parser.add_argument("--vocab-size", type=int, default=20_000, help="words per language")
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--sentences-per-word", type=int, default=10)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--only", default=None, help="comma-separated labels to build (default: all)")
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    common.offline()
    import staticsem
    from staticsem.eval.encoders import load_encoder

    en, de, pairs, data = prepare(args)
    wanted = None if args.only is None else {x.strip() for x in args.only.split(",")}
    paths = {
        label: build(args, label, options)
        for label, options in builds(args, en, de, pairs).items()
        if wanted is None or label in wanted
    }
    teacher = load_encoder(f"st:{args.teacher}#{args.prompt}" if args.prompt else f"st:{args.teacher}")
    encoders = {TEACHER: teacher, **{label: staticsem.load(path) for label, path in paths.items()}}
    metas = {label: {**m.metadata, "words": len(m)} for label, m in encoders.items() if label != TEACHER}
    results = evaluate(encoders, data)
    report(results, metas)
    common.save_json(
        args.output,
        {"settings": {k: str(v) for k, v in vars(args).items()}, "results": results, "metadata": metas},
    )


if __name__ == "__main__":
    main()
