"""Does the GPU's teacher precision move quality? Stage 1 of the same sentences with the CPU's int8 teacher
(here) against the GPU's fp32, fp16 and bf16 teacher (``gpu_build.py``'s ``quality`` part, whose files
``quality-{fp32,fp16,bf16}.npy`` and ``quality-counts.npy`` came back from the ``device`` call).

The precision enters the build at the teacher's passes (stage 1, the pieces, the KD targets); this compares
the stage-1 word vectors where it enters, before anything else mixes in: the per-word cosine to each other,
and each set of vectors as a static model (the first 20,000 words of the recipe's vocabulary, the mean
state of each word seen in the first ``--sentences`` sentences of the pack) on the dev tasks.

    python benchmarks/gpu_quality.py --gpu /work/.device/1 --data ../shared/data --out /tmp/gpu-quality
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
QUALITY_WORDS = 20_000


def cpu_vectors(pack: Path, count: int, out: Path) -> np.ndarray:
    """Stage 1 of the pack's first ``count`` sentences with the CPU's default teacher (onnx-int8)."""
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.teacher import Teacher

    saved = out / "quality-int8.npy"
    if saved.is_file():
        return np.load(saved)
    with gzip.open(pack / "sentences.txt.gz", "rt", encoding="utf-8") as handle:
        sentences = [next(handle).rstrip("\n") for _ in range(count)]
    words = (pack / "words.txt").read_text(encoding="utf-8").split()
    teacher = Teacher(None, backend="onnx-int8", cache=out / "onnx", precision="int8")
    result = extract(teacher, sentences, words, lowercase=True)
    vectors = result.vectors()[:QUALITY_WORDS].astype(np.float16)
    np.save(saved, vectors)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpu", type=Path, required=True, help="the device call's files")
    parser.add_argument("--pack", type=Path, default=HERE.parent / ".device")
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--sentences", type=int, default=30_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", default="sts,wordsim,classification,retrieval")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from staticsem.model import StaticModel

    args.out.mkdir(parents=True, exist_ok=True)
    counts = np.load(args.gpu / "quality-counts.npy")
    seen = np.flatnonzero(counts > 0)
    words = (args.pack / "words.txt").read_text(encoding="utf-8").split()[:QUALITY_WORDS]
    sets = {"int8-cpu": cpu_vectors(args.pack, args.sentences, args.out)}
    sets |= {f"{p}-gpu": np.load(args.gpu / f"quality-{p}.npy") for p in ("fp32", "fp16", "bf16")}
    unit = {
        k: v[seen].astype(np.float32) / np.linalg.norm(v[seen].astype(np.float32), axis=1)[:, None]
        for k, v in sets.items()
    }
    cosines = {f"{a} vs {b}": float((unit[a] * unit[b]).sum(1).mean()) for a in unit for b in unit if a < b}
    print(json.dumps(cosines, indent=1))
    models = []
    for name, vectors in sets.items():
        folder = args.out / name
        StaticModel([words[i] for i in seen], np.ascontiguousarray(vectors[seen], np.float32)).save(folder)
        models.append(str(folder))
    report = args.out / "report.json"
    from staticsem.cli import app

    tasks = ["--tasks", args.tasks, "--no-speed", "--no-plots", "--no-progress"]
    app(["eval", *models, "--data", str(args.data), *tasks, "--output", str(report)], standalone_mode=False)
    (args.out / "cosines.json").write_text(json.dumps(cosines, indent=1))


if __name__ == "__main__":
    main()
