"""The classic corpus baselines (GloVe, word2vec skip-gram, fastText CBOW) on the whole 1.5 M-sentence corpus.

Each is trained with staticsem's defaults (256 d, at most 50,000 words seen ≥ 10 times) on the three
gzip files of ``--data``/corpus and scored on the six word-similarity sets of ``methods.py``. Models are
kept in ``--models``/full and reused. Run (under the CPU lock; ~60 min on 2 cores)::

    python benchmarks/corpus_baselines.py --output benchmarks/results/glove_full_corpus.json

``--only "glove,word2vec skip-gram"`` builds and scores just those rows; ``--reference DIR`` also scores
the vectors of Stanford's GloVe tool (``DIR/vectors.txt``, from ``../shared/tools/glove-reference/run.sh``
on the same corpus tokenised as ``encode`` does) as the row "glove (reference C tool)".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import _common as common
from methods import WORDSIM

BASELINES = [
    ("glove", "glove", {}),
    ("word2vec skip-gram", "word2vec", {"sg": True}),
    ("fasttext cbow", "fasttext", {}),
]


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--only", default=None, help="comma-separated labels to build (default: all)")
    parser.add_argument("--reference", type=Path, default=None, help="folder of the C tool's vectors.txt")
    args = parser.parse_args()
    import staticsem
    from staticsem.eval.wordsim import WordSimilarity

    corpus = [str(args.data / f"corpus/enwiki2015-sentences-0{i}.txt.gz") for i in range(3)]
    wanted = {w.strip() for w in args.only.split(",")} if args.only else {label for label, _, _ in BASELINES}
    unknown = wanted - {label for label, _, _ in BASELINES}
    if unknown:
        parser.error(f"unknown --only labels: {', '.join(sorted(unknown))}")
    results: dict[str, Any] = {}
    if args.reference is not None:
        model = staticsem.load(args.reference / "vectors.txt")
        label = "glove (reference C tool)"
        results[label] = {"scores": WordSimilarity(args.data, WORDSIM)(model), "words": len(model)}
        print(label, results[label], flush=True)
    for label, method, options in (b for b in BASELINES if b[0] in wanted):
        dest = args.models / "full" / label.replace(" ", "-")
        started = time.perf_counter()
        if not (dest / "config.json").is_file():
            staticsem.distill(method, out=dest, corpus=corpus, vocab_size=50_000, min_count=10, **options)
        model = staticsem.load(dest)
        results[label] = {
            "scores": WordSimilarity(args.data, WORDSIM)(model),
            "minutes": round((time.perf_counter() - started) / 60, 1),
            "words": len(model),
            "seconds_recorded": model.metadata.get("seconds"),
            "peak_rss_mib": model.metadata.get("peak_rss_mib"),
        }
        print(label, results[label], flush=True)
        common.save_json(args.output, results)


if __name__ == "__main__":
    main()
