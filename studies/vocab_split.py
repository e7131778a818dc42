"""How should a multilingual build share its vocabulary budget: equally, or by corpus size (issue 47)?

A full build of each split costs hours with mE5-small, so this measures what the split decides: which words
each language gets. From a finished ``--vocab-split equal`` build's work folder (each language's counted
vocabulary in ``LANG/vocab.json``, its top words by count), it gives every language its share of
``--vocab-size`` under both splits (``share_vocabulary``, corpus lines as read), keeps each language's top
words up to its share (or all it has at ``--min-count``), and reports per language with STS data the share
of word tokens of its STS-B dev sentences (``multilingual/sts/stsb-LANG-dev.tsv``, both sides) that the
merged vocabulary holds, split as the model splits them. English under ``corpus`` can only be given the
words its work folder counted (its share is larger than that): its figure is a lower bound.

Run::

    python studies/vocab_split.py --work runs/ml/.model.work --model runs/ml/model \\
        --output studies/results/vocab_split.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True, help="the equal-split build's work folder")
    parser.add_argument("--model", type=Path, required=True, help="that build's model (its splitter)")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--vocab-size", type=int, default=360_000)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import staticsem
    from staticsem.distillation.corpus.languages import share_vocabulary

    model = staticsem.load(args.model)
    languages = json.loads((args.work / "languages.json").read_text(encoding="utf-8"))["languages"]
    vocab = {
        lang: json.loads((args.work / lang / "vocab.json").read_text(encoding="utf-8")) for lang in languages
    }
    sizes = {lang: record["sentences"] for lang, record in vocab.items()}
    results: dict[str, dict[str, object]] = {}
    for split in ("equal", "corpus"):
        shares = share_vocabulary(args.vocab_size, sizes, split)
        words = {w for lang, record in vocab.items() for w in record["words"][: shares[lang]]}
        lowercase = {w.lower() for w in words}
        coverage: dict[str, float] = {}
        for lang in vocab:
            path = args.data / "multilingual" / "sts" / f"stsb-{lang}-dev.tsv"
            if not path.is_file():
                continue
            texts = [
                s for line in path.read_text(encoding="utf-8").splitlines() for s in line.split("\t")[1:]
            ]
            tokens = [w for text in texts for w in model.splitter.words(text)]
            held = sum(w in words or w.lower() in lowercase for w in tokens)
            coverage[lang] = round(100.0 * held / max(len(tokens), 1), 2)
        results[split] = {
            "shares": shares,
            "words_kept": {lang: min(shares[lang], len(r["words"])) for lang, r in vocab.items()},
            "merged_words": len(words),
            "sts_token_coverage": coverage,
        }
        print(f"{split}: {json.dumps(results[split])}", flush=True)
    if args.output:
        args.output.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
