"""Import fidelity: does a model2vec folder read by staticsem encode as model2vec itself does?

The folder is model2vec's own distillation of the packaged teacher (``model2vec.distill.distill(<packaged
all-MiniLM-L6-v2>, pca_dims=256)``, float16, cached in ``--models`` as for encode_speed.py). Both libraries
encode, in the same run:

* the 3,000 STS-B dev sentences (both columns): per-row cosine between ``staticsem.load(folder).encode``
  and ``model2vec.StaticModel.from_pretrained(folder).encode`` (mean, minimum, rows below 0.9999, rows that
  are zero for both), the largest relative norm difference, and the STS-B Spearman of each;
* the words of the word-similarity sets (``wordsim/*.tsv``), each as a one-word text: the same per-row
  cosines, and each library's mean Spearman (``staticsem.eval.wordsim.WordSimilarity``).

Run it with another staticsem on ``PYTHONPATH`` (e.g. ``main``'s ``src``) to measure that version::

    python benchmarks/import_fidelity.py --output benchmarks/results/import_fidelity.json
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np

import _common as common


def compare(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """Per-row cosine and norm agreement of two encodings of the same texts."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    norm_ours, norm_theirs = np.linalg.norm(ours, axis=1), np.linalg.norm(theirs, axis=1)
    both_zero = (norm_ours == 0) & (norm_theirs == 0)
    live = ~both_zero
    cosines = np.sum(ours * theirs, axis=1)[live] / np.maximum(norm_ours * norm_theirs, 1e-30)[live]
    worst = int(np.flatnonzero(live)[np.argmin(cosines)]) if cosines.size else -1
    return {
        "rows": len(ours),
        "zero_in_both": int(both_zero.sum()),
        "mean_cosine": float(cosines.mean()),
        "min_cosine": float(cosines.min()),
        "rows_below_0.9999": int((cosines < 0.9999).sum()),
        "worst_row": worst,
        "max_relative_norm_difference": float(
            np.max(np.abs(norm_ours - norm_theirs)[live] / np.maximum(norm_theirs[live], 1e-30))
        ),
    }


def sts_spearman(vectors: np.ndarray, gold: list[float]) -> float:
    """STS-B Spearman ×100 of the pair cosines (first half vs second half of ``vectors``)."""
    from staticsem.eval.base import spearman100

    half = len(gold)
    a, b = vectors[:half], vectors[half:]
    norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    return spearman100(gold, np.sum(a * b, axis=1) / norms)


def main() -> None:
    args = common.base_parser(__doc__).parse_args()
    common.offline()
    folder = common.build_model2vec(args.models)
    import model2vec

    import staticsem
    from staticsem.eval.base import Encoder
    from staticsem.eval.wordsim import WordSimilarity

    ours = staticsem.load(folder)
    theirs = model2vec.StaticModel.from_pretrained(str(folder))
    print(f"staticsem {staticsem.__file__}: {ours!r}", flush=True)

    gold, first, second = common.read_stsb(args.data)
    texts = first + second
    ours_sts = ours.encode(texts)
    theirs_sts = theirs.encode(texts, use_multiprocessing=False)
    sts = compare(ours_sts, theirs_sts)
    sts["worst_text"] = texts[sts["worst_row"]]
    sts["spearman_staticsem"] = sts_spearman(ours_sts, gold)
    sts["spearman_model2vec"] = sts_spearman(theirs_sts, gold)

    wordsim = WordSimilarity(args.data)
    words = sorted({w for a, b, _ in wordsim.pairs.values() for w in (*a, *b)})
    word = compare(ours.encode(words), theirs.encode(words, use_multiprocessing=False))
    word["worst_text"] = words[word["worst_row"]]
    word["spearman_staticsem"] = wordsim(ours)["mean"]
    word["spearman_model2vec"] = wordsim(cast(Encoder, theirs))["mean"]  # its argument is named sentences

    rows = [
        [
            name,
            f"{r['rows']:,}",
            f"{r['mean_cosine']:.6f}",
            f"{r['min_cosine']:.6f}",
            str(r["rows_below_0.9999"]),
            str(r["zero_in_both"]),
            f"{r['max_relative_norm_difference']:.2e}",
            f"{r['spearman_staticsem']:.2f}",
            f"{r['spearman_model2vec']:.2f}",
        ]
        for name, r in (("STS-B dev sentences", sts), ("word-similarity words", word))
    ]
    common.print_table(
        f"staticsem.load vs model2vec on {folder.name} (normalize={getattr(ours, 'normalize', True)})",
        [
            "texts",
            "rows",
            "mean cosine",
            "min cosine",
            "rows < 0.9999",
            "zero in both",
            "max norm diff",
            "Spearman staticsem",
            "Spearman model2vec",
        ],
        rows,
    )
    print(f"worst STS-B row: {sts['worst_text']!r}; worst word: {word['worst_text']!r}")
    common.save_json(
        args.output,
        {
            "benchmark": "import_fidelity",
            "date": time.strftime("%Y-%m-%d"),
            "model": str(folder),
            "staticsem_module": staticsem.__file__,
            "normalize": getattr(ours, "normalize", True),  # staticsem before issue 13 always normalised
            "sts_b_dev": sts,
            "wordsim_words": word,
        },
    )


if __name__ == "__main__":
    main()
