"""What lifts dense retrieval for a mean of word vectors? Each lever alone, on one finished SWE build.

Question (issue 43): the default MiniLM model keeps 93 % of its teacher on STS but only 75 % on dense
retrieval (SciFact nDCG@10 49.4 against 66.0). Which change to the distillation, or to encoding, moves
SciFact dense nDCG@10 without costing STS or word similarity?

Reuses the work folder of a finished SWE build (``.DIR.work``): its stage-2 table, the chosen and short
sentences and their teacher embeddings. Each run starts from that stage-2 table and changes one thing:

- ``default``: stage 3a re-trained as the build did (the reference row);
- ``idf=P`` / ``sif=A``: encode-time term weighting folded into the rows of the built model (a row times
  ``log(total / count) ** P``, or SIF's ``A / (A + count / total)``; corpus counts from the work folder);
- ``docsplit=1``: documents encoded as the mean of their sentences' unit vectors (queries as before);
- ``passages=N``: N passages (consecutive corpus sentences up to ``--passage-words`` words) with the
  teacher's embeddings join the distillation targets;
- ``pairs=N``: N search-shaped pairs, a corpus sentence of 5-15 words and the passage around it (the
  sentence left out), both with the teacher's embeddings, as a second objective whose batches hold both
  sides of each pair (the student learns the teacher's query-to-passage similarities);
- ``short=N``: only the first N of the build's short sentences (0: none);
- ``pieces=W``: unknown words become their teacher subword pieces (``distill --fallback pieces``), each
  piece a row of its own that joins the table (initialised by the piece alone through the teacher,
  projected by the build's PCA) and is distilled with it; an unknown word of k pieces weighs k ** W against
  a known word's 1 (W 1: each piece one unit of the mean; 0: the mean of its pieces); ``pieces=init``: the
  W = 1 rows as initialised, without distillation;
- any ``KDSettings`` field (``tau=0.07``) for the re-trained runs.
Runs combine with ``+`` (``pairs=20000+short=60000``).

Passages come from the Wikipedia files under ``--data/corpus`` in their order (a window never crosses a
file); sentences listed in ``--exclude`` (default the shared decontamination list) are dropped first.
Teacher embeddings (int8 ONNX, as the build) are cached in the work folder's ``onnx/``.

Every run is scored in the same process: SciFact dense nDCG@10 (and recall@100), the STS mean of STS-B
dev, SICK-R trial and SICK-R train, and the word-similarity mean.

Run::

    python studies/retrieval_levers.py --work runs/.base.work --model runs/base \\
        --runs default,idf=1,docsplit=1,pairs=20000 --output studies/results/retrieval_levers.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import _benchmarks  # studies' helpers (and benchmarks/ on the path)
from _benchmarks import STS_FILES

REPO = Path(__file__).resolve().parent.parent
SHORT = (5, 15)
LEVERS = {
    "idf": float,
    "sif": float,
    "docsplit": int,
    "passages": int,
    "pairs": int,
    "short": int,
    "pieces": str,
}


def parse_run(spec: str) -> dict[str, Any]:
    """``a=1+b=2`` → {"a": 1, "b": 2}; ``default`` → {}."""
    return _benchmarks.parse_run(spec, LEVERS)


# ---------------------------------------------------------------------------------------------- text
def wiki_windows(data: Path, exclude: Any, words: int, seed: int, count: int) -> list[list[str]]:
    """``count`` random windows of consecutive corpus sentences (each window up to ``words`` words, at
    least two sentences), drawn from the Wikipedia files in order; excluded sentences dropped first."""
    from staticsem.text import word_count

    windows: list[list[str]] = []
    for path in sorted((data / "corpus").glob("enwiki*.txt.gz")):
        current: list[str] = []
        size = 0
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                sentence = line.strip()
                if not sentence or sentence in exclude:
                    continue
                n = word_count(sentence)
                if n > 64:
                    continue
                if size + n > words and current:
                    if len(current) >= 2:
                        windows.append(current)
                    current, size = [], 0
                current.append(sentence)
                size += n
    random.Random(seed).shuffle(windows)
    return windows[:count]


def pairs_of(windows: list[list[str]], seed: int) -> tuple[list[str], list[str]]:
    """For each window with a sentence of 5-15 words: that sentence (drawn at random among them) and the
    rest of the window."""
    from staticsem.text import word_count

    rng = random.Random(seed)
    queries, passages = [], []
    for window in windows:
        short = [i for i, s in enumerate(window) if SHORT[0] <= word_count(s) <= SHORT[1]]
        if not short:
            continue
        pick = rng.choice(short)
        queries.append(window[pick])
        passages.append(" ".join(s for i, s in enumerate(window) if i != pick))
    return queries, passages


def teacher_embeddings(texts: list[str], cache: Path) -> np.ndarray:
    """The packaged teacher's embeddings (int8 ONNX, as the build), cached under a hash of the texts."""
    from safetensors.numpy import load_file

    from staticsem.distillation.stages.extract import sentence_embeddings
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.io.atomic import save_tensors

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    stored = cache / f"levers-{key}.safetensors"
    if stored.is_file():
        return load_file(str(stored))["embeddings"]
    teacher = Teacher(None, backend="onnx-int8", cache=cache)
    started = time.perf_counter()
    embeddings = sentence_embeddings(teacher, texts, 32, teacher.hidden_size, show_progress=True)
    print(f"teacher: {len(texts):,} texts in {time.perf_counter() - started:.0f} s", flush=True)
    save_tensors(stored, {"embeddings": embeddings})
    return embeddings


# ---------------------------------------------------------------------------------------------- runs
class DocSplit:
    """Encodes a text of several sentences as the mean of its sentences' unit vectors."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def encode(self, texts: list[str]) -> np.ndarray:
        from blingfire import text_to_sentences

        parts = [text_to_sentences(t).split("\n") for t in texts]
        flat = [s for p in parts for s in p]
        vectors = self.model.encode(flat)
        owner = np.repeat(np.arange(len(texts)), [len(p) for p in parts])
        sums = np.zeros((len(texts), vectors.shape[1]), np.float32)
        np.add.at(sums, owner, vectors)
        return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)


def with_pieces(stage2: Any, work: Path, weight: float) -> Any:
    """``stage2`` with one row per subword piece of the teacher's tokenizer (``staticsem.pieces``, as
    ``distill --fallback pieces`` starts them: each piece alone through the teacher, through the build's
    PCA fit), an unknown word of k pieces weighing ``k ** weight``."""
    from safetensors.numpy import load_file

    from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE
    from staticsem.distillation.stages.extract import alone_states
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.io.atomic import save_tensors
    from staticsem.model import StaticModel
    from staticsem.pieces import PieceTable

    tokenizer = stage2.tokenizer
    stored = work / "onnx" / "levers-pieces.safetensors"
    if not stored.is_file():
        teacher = Teacher(None, backend="onnx-int8", cache=work / "onnx")
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        texts = [(tokenizer.id_to_token(i) or "").removeprefix("##") or "#" for i in range(size)]
        save_tensors(stored, {"states": alone_states(teacher, texts, 256)})
    states = load_file(str(stored))["states"]
    rows = ABTT.load(work / ABTT_FILE).apply(states).astype(np.float32)
    pieces = PieceTable(rows, tokenizer, weight)
    return StaticModel(
        stage2.vocab, stage2.vectors, tokenizer=tokenizer, pieces=pieces, metadata=stage2.metadata
    )


def weighted(model: Any, weights: np.ndarray) -> Any:
    from staticsem.model import StaticModel

    vectors = model.vectors.astype(np.float32) * weights[:, None].astype(np.float32)
    return StaticModel(model.vocab, vectors, tokenizer=model.tokenizer, metadata=model.metadata)


def pair_objective(
    start: Any, queries: list[str], passages: list[str], targets: np.ndarray, tau: float
) -> Any:
    """Both sides of each pair in one batch; the in-batch similarity-distribution loss over all of them."""
    import torch

    from staticsem.distillation.stages.kd import Bags, Objective, similarity_loss

    class Pairs(Objective):
        name = "pairs"

        def __init__(self) -> None:
            self.sides = Bags(start, queries), Bags(start, passages)
            centred = targets - targets.mean(axis=0)
            self.targets = (
                torch.from_numpy(centred[: len(queries)]),
                torch.from_numpy(centred[len(queries) :]),
            )
            self.size = len(queries)

        def usable(self) -> np.ndarray:
            return np.flatnonzero((self.sides[0].counts > 0) & (self.sides[1].counts > 0))

        def loss(self, table: Any, rows: np.ndarray, sparse: bool) -> Any:
            student = torch.cat([side.pool(table, rows, sparse) for side in self.sides])
            teacher = torch.cat([self.targets[0][rows], self.targets[1][rows]])
            return similarity_loss(student, teacher, tau)

    return Pairs()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True, help="work folder of a finished SWE build")
    parser.add_argument("--model", type=Path, required=True, help="that build's model folder")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--exclude", type=Path, default=None, help="[DATA/decontam/eval-sentences.sha1]")
    parser.add_argument("--runs", default="default,idf=1,docsplit=1")
    parser.add_argument("--passage-words", type=int, default=120)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--save", type=Path, help="keep each re-trained run's model in this folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from safetensors.numpy import load_file

    import staticsem
    from staticsem.distillation.corpus.exclude import Exclusion
    from staticsem.distillation.stages.kd import Distillation, KDSettings, train_table
    from staticsem.eval.retrieval import Retrieval
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    work, data = args.work, args.data
    exclude = Exclusion([str(args.exclude or data / "decontam" / "eval-sentences.sha1")])
    retrieval, sts, wordsim = Retrieval(data / "retrieval"), STS(data, STS_FILES), WordSimilarity(data)

    def scores(encoder: Any) -> dict[str, float]:
        r, s, w = retrieval(encoder), sts(encoder), wordsim(encoder)
        return {
            "scifact": r["scifact"],
            "scifact_recall@100": r["scifact_recall@100"],
            **{f"sts:{k}": v for k, v in s.items()},
            "ws:mean": w["mean"],
            "ws:coverage": float(np.mean([v for k, v in w.items() if k.endswith("_coverage")])),
        }

    built = staticsem.load(args.model)
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    chosen_targets = load_file(str(work / "stage1.safetensors"))["embeddings"]
    short: list[str] = []
    short_targets = np.zeros((0, chosen_targets.shape[1]), np.float32)
    if (work / "targets.json").is_file():
        short = json.loads((work / "targets.json").read_text())["sentences"]
        short_targets = load_file(str(work / "targets.safetensors"))["embeddings"]
    stage2 = staticsem.load(work / "stage2")
    vocab = json.loads((work / "vocab.json").read_text())
    counts = dict(zip(vocab["words"], vocab["counts"], strict=True))
    total = float(sum(vocab["counts"]))
    frequency = np.array([counts.get(w.lower(), 1) for w in built.vocab], np.float64) / total

    specs = [s.strip() for s in args.runs.split(",") if s.strip()]
    wanted = [parse_run(s) for s in specs]
    need = max([o.get("passages", 0) + o.get("pairs", 0) for o in wanted] + [0])
    windows = wiki_windows(data, exclude, args.passage_words, 0, 2 * need) if need else []
    results: dict[str, Any] = {"built": scores(built)}
    print(f"built model: {json.dumps(results['built'])}", flush=True)
    for spec, options in zip(specs, wanted, strict=True):
        started = time.perf_counter()
        encoder: Any = built
        if "idf" in options:
            encoder = weighted(built, np.log(1.0 / frequency) ** options.pop("idf"))
        if "sif" in options:
            a = options.pop("sif")
            encoder = weighted(built, a / (a + frequency))
        split = bool(options.pop("docsplit", 0))
        retrain = any(k not in ("idf", "sif", "docsplit") for k in parse_run(spec)) or spec == "default"
        record: dict[str, Any] = {}
        if retrain:
            keep = options.pop("short", len(short))
            texts = [*chosen, *short[:keep]]
            targets = np.concatenate([chosen_targets, short_targets[:keep]])
            if count := options.pop("passages", 0):
                passages = [" ".join(w) for w in windows[:count]]
                texts += passages
                targets = np.concatenate([targets, teacher_embeddings(passages, work / "onnx")])
            pairs = options.pop("pairs", 0)
            pieces = options.pop("pieces", "")
            weight = 1.0 if pieces == "init" else float(pieces or 0)
            start = with_pieces(stage2, work, weight) if pieces else stage2
            settings = replace(KDSettings(), **options, **({"max_steps": 0} if pieces == "init" else {}))
            objectives = [Distillation(start, texts, targets, settings.tau, settings.center_targets)]
            if pairs:
                queries, contexts = pairs_of(windows[len(windows) - pairs :], 0)
                both = teacher_embeddings([*queries, *contexts], work / "onnx")
                objectives.append(pair_objective(start, queries, contexts, both, settings.tau))
                record["pairs"] = len(queries)
            model, stats = train_table(start, objectives, settings, show_progress=False)
            encoder = model
            if args.save:
                model.save(args.save / re.sub(r"[^\w.=+-]", "_", spec), dtype="float32")
            record.update(steps=stats["steps"], kd_sentences=len(texts))
        record.update(scores(DocSplit(encoder) if split else encoder))
        record["seconds"] = round(time.perf_counter() - started, 1)
        results[spec] = record
        print(
            f"{spec}: SciFact {record['scifact']:.2f}  STS mean {record['sts:mean']:.2f}  "
            f"word-sim {record['ws:mean']:.2f}  ({record['seconds']:.0f} s)",
            flush=True,
        )
        save(args.output, work, results)


def save(output: Path | None, work: Path, results: dict[str, Any]) -> None:
    """Write the runs so far (atomically), keeping the file's earlier runs of other names."""
    if output is None:
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(output.read_text())["results"] if output.is_file() else {}
    payload = {"study": "retrieval_levers", "date": time.strftime("%Y-%m-%d"), "work": str(work)}
    tmp = output.with_suffix(".tmp")
    tmp.write_text(json.dumps({**payload, "results": {**earlier, **results}}, indent=1) + "\n")
    tmp.replace(output)


if __name__ == "__main__":
    sys.exit(main())
