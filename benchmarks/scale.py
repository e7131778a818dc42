"""Scale-out on Ray: its overhead against one process for stage-1 extraction and bulk encoding.

Extraction: the same sentences (the first ``--sentences`` corpus sentences within the word limits) and the
same vocabulary (the 30,000 most frequent Wikipedia words) go through the packaged teacher

* in one process (``extract.extract``, torch on all cores: what ``staticsem distill`` does);
* on a local Ray cluster (``RayScale.extract``) with 1 replica × 2 threads (the single process's layout:
  the difference is Ray's own cost: scheduling, shipping sentences and results, per-shard files, merge);
* on the same cluster with 2 replicas × 1 thread (the default: one replica per CPU).

Ray rows are timed with the cluster and the replicas already up (a cluster is long-lived); their start-up
(``ray.init`` and loading the teacher in every replica) is reported on its own row. Rounds are interleaved
and the best of ``--rounds`` is kept. Every Ray result is checked against the single-process one (same
counts, vectors and teacher embeddings within float rounding).

Encoding: every sentence of the three corpus files (``corpus/*.txt.gz``, 1.5 M lines) with the 30k × 256
float16 token model of ``_common.build_staticsem``, written as Parquet (id, vector) shards by
``encode_files`` in one process and with Ray Data (cluster already up). A sample of 20,000 ids is checked
for identical vectors.

Run (under the shared CPU lock)::

    flock /tmp/staticsem-cpu.lock python benchmarks/scale.py --output benchmarks/results/scale.json
    python benchmarks/scale.py --sentences 500 --rounds 1 --skip-encode      # quick check
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

LAYOUTS = {"ray 1 replica x 2 threads": 1, "ray 2 replicas x 1 thread": 2}


def chosen_sentences(data: Path, count: int) -> list[str]:
    from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences

    return list(itertools.islice(iter_sentences([str(data / common.CORPUS)], CorpusOptions()), count))


def single(teacher: Any, sentences: list[str], vocab: list[str], folder: Path) -> tuple[float, Any]:
    from staticsem.distillation.stages.extract import extract

    started = time.perf_counter()
    result = extract(
        teacher,
        sentences,
        vocab,
        lowercase=True,
        checkpoint=folder / "single.partial.safetensors",
        show_progress=False,
    )
    return time.perf_counter() - started, result


def on_ray(
    scale: Any, teacher: Any, sentences: list[str], vocab: list[str], folder: Path
) -> tuple[float, Any]:
    started = time.perf_counter()
    result = scale.extract(
        teacher,
        sentences,
        vocab,
        lowercase=True,
        checkpoint=folder / f"ray{len(scale.replicas)}.partial.safetensors",
        show_progress=False,
    )
    return time.perf_counter() - started, result


def same(reference: Any, result: Any) -> dict[str, float | bool]:
    seen = reference.counts > 0
    return {
        "counts_equal": bool(np.array_equal(reference.counts, result.counts)),
        "max_vector_diff": float(np.abs(reference.vectors()[seen] - result.vectors()[seen]).max()),
        "max_embedding_diff": float(np.abs(reference.embeddings - result.embeddings).max()),
    }


def measure_extraction(args: Any, vocab: list[str]) -> dict[str, Any]:
    import ray

    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.scale.distill import RayScale

    sentences = chosen_sentences(args.data, args.sentences)
    teacher = Teacher()
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_seconds = time.perf_counter() - started
    scales, startup = {}, {}
    for label, replicas in LAYOUTS.items():
        started = time.perf_counter()
        scales[label] = RayScale("auto", replicas, show_progress=False)
        scales[label].pool()
        startup[label] = time.perf_counter() - started
        scales[label].close()  # the two pools would share the 2 CPUs; each restarts before its runs
    times: dict[str, list[float]] = {"single process": [], **{label: [] for label in LAYOUTS}}
    checks: dict[str, Any] = {}
    reference = None
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            seconds, reference = single(teacher, sentences, vocab, Path(tmp))
            times["single process"].append(seconds)
            for label in LAYOUTS:
                scale = scales[label]
                scale.pool()
                seconds, result = on_ray(scale, teacher, sentences, vocab, Path(tmp))
                scale.close()
                times[label].append(seconds)
                checks[label] = same(reference, result)
        print(
            f"round {round_number + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
            flush=True,
        )
    ray.shutdown()
    best = {label: min(values) for label, values in times.items()}
    base = best["single process"]
    return {
        "sentences": len(sentences),
        "words": len(vocab),
        "rounds": args.rounds,
        "seconds": times,
        "best_seconds": best,
        "overhead_vs_single": {label: best[label] / base - 1 for label in LAYOUTS},
        "sentences_per_second": {label: len(sentences) / s for label, s in best.items()},
        "per_replica_sentences_per_second": {
            label: len(sentences) / best[label] / replicas
            for label, replicas in {"single process": 1, **LAYOUTS}.items()
        },
        "ray_init_seconds": init_seconds,
        "replica_startup_seconds": startup,
        "checks": checks,
    }


def measure_encoding(args: Any) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import ray

    from staticsem.scale.encode import encode_files

    _, model = common.build_staticsem(args.models, args.data)
    pattern = args.encode_input or str(args.data / "corpus" / "*.txt.gz")
    out = Path(tempfile.mkdtemp(prefix="staticsem-scale-"))
    try:
        started = time.perf_counter()
        rows = encode_files(model, pattern, out / "single", show_progress=False)
        single_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        init_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ray_rows = encode_files(model, pattern, out / "ray", ray="auto")
        ray_seconds = time.perf_counter() - started
        ray.shutdown()
        ids = pq.read_table(out / "single", columns=["id"]).column("id")
        sample = pc.take(ids, np.random.default_rng(0).choice(len(ids), min(20_000, len(ids)), replace=False))
        tables = [
            pq.read_table(out / name, filters=pc.is_in(pc.field("id"), sample)) for name in ("single", "ray")
        ]
        first, second = (t.sort_by("id") for t in tables)
        identical = first.column("id").equals(second.column("id")) and np.array_equal(
            np.array(first.column("vector").to_pylist()), np.array(second.column("vector").to_pylist())
        )
        size = sum(p.stat().st_size for p in (out / "single").glob("*.parquet"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "rows": rows,
        "ray_rows": ray_rows,
        "model": model.name,
        "single_seconds": single_seconds,
        "ray_seconds": ray_seconds,
        "ray_init_seconds": init_seconds,
        "overhead_vs_single": ray_seconds / single_seconds - 1,
        "single_rows_per_second": rows / single_seconds,
        "ray_rows_per_second": ray_rows / ray_seconds,
        "sample_identical": bool(identical),
        "parquet_bytes": size,
    }


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--sentences", type=int, default=4000, help="sentences through the teacher per run")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best is kept")
    parser.add_argument("--skip-encode", action="store_true", help="measure extraction only")
    parser.add_argument("--encode-input", help="files to encode (default: DATA/corpus/*.txt.gz)")
    args = parser.parse_args()
    common.offline()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    words = common.write_word_list(args.data, args.models / f"wiki-words-{common.VOCAB_SIZE}.txt")
    vocab = [w.lower() for w in words.read_text(encoding="utf-8").split()]
    vocab = list(dict.fromkeys(vocab))
    results: dict[str, Any] = {"extraction": measure_extraction(args, vocab)}
    ext = results["extraction"]
    common.print_table(
        f"stage-1 extraction of {ext['sentences']} sentences (packaged MiniLM teacher, 2 cores)",
        ["path", "best s", "sent/s", "per replica sent/s", "vs single"],
        [
            [
                label,
                f"{ext['best_seconds'][label]:.1f}",
                f"{ext['sentences_per_second'][label]:.0f}",
                f"{ext['per_replica_sentences_per_second'][label]:.0f}",
                f"{ext['overhead_vs_single'][label]:+.1%}" if label in LAYOUTS else "",
            ]
            for label in ext["best_seconds"]
        ],
    )
    print(f"ray.init {ext['ray_init_seconds']:.1f} s; replica start-up {ext['replica_startup_seconds']}")
    print(f"checks: {ext['checks']}")
    if not args.skip_encode:
        results["encoding"] = enc = measure_encoding(args)
        common.print_table(
            f"encode {enc['rows']:,} corpus lines to Parquet (30k x 256 float16 token model)",
            ["path", "seconds", "rows/s", "vs single"],
            [
                [
                    "single process",
                    f"{enc['single_seconds']:.1f}",
                    f"{enc['single_rows_per_second']:,.0f}",
                    "",
                ],
                [
                    "ray data (2 CPUs)",
                    f"{enc['ray_seconds']:.1f}",
                    f"{enc['ray_rows_per_second']:,.0f}",
                    f"{enc['overhead_vs_single']:+.1%}",
                ],
            ],
        )
        print(f"ray.init {enc['ray_init_seconds']:.1f} s; sample identical: {enc['sample_identical']}")
    common.save_json(args.output, results)


if __name__ == "__main__":
    main()
