"""Encoding throughput and memory: staticsem vs model2vec vs sentence-transformers' StaticEmbedding.

Target (the issue): staticsem encodes at least 1.5x as many sentences/s as model2vec, both on one thread,
on the same 20,000 Wikipedia sentences (first lines of corpus/enwiki2015-sentences-00.txt.gz), with models
of the same size (~30k rows x 256 dims, float16, both libraries' default):

* staticsem: ``staticsem.distill("token")`` over the 30,000 most frequent Wikipedia words;
* model2vec: ``model2vec.distill.distill(<packaged all-MiniLM-L6-v2>, pca_dims=256)`` (29,525 tokens);
* ST: ``StaticEmbedding.from_model2vec`` of that model2vec folder (+ ``Normalize``), on the CPU;
* staticsem imported model2vec: ``staticsem.load`` of that model2vec folder (token-level: it encodes as
  model2vec does). ``--baseline-src DIR`` adds the same row run with another staticsem (``PYTHONPATH=DIR``,
  e.g. ``main``'s ``src``), interleaved with the others, and prints the ratio of the two;
* ``--model LABEL=DIR`` (repeatable): any staticsem folder, one thread (e.g. the distilled default of
  before and after a change, against model2vec in the same run); ``DIR#query`` / ``DIR#document`` times
  that mode's encoding (``encode_query`` / ``encode_document``).

``--languages all`` (or ``en,de,zh,...``) measures speed per language instead (``_speed_languages.py``):
every model (the two built ones, ``--model`` and ``--model2vec LABEL=DIR`` folders) on each language's
corpus (``multilingual/corpus/LANG.txt.gz``; English: the Wikipedia file), one thread, with sentences/s,
characters/s and their ratio to English's.

Every measurement runs in a fresh subprocess. "1 thread" rows set TOKENIZERS_PARALLELISM=false and
OMP/OPENBLAS/MKL/RAYON_NUM_THREADS=1 (and ``torch.set_num_threads(1)``) and pin the process to core 0 with
``os.sched_setaffinity``; the other rows run unpinned with library defaults. Throughput is the best of
``--repeats`` timed runs after one warm-up run ("cold" is that first call: staticsem then also resolves
each unknown word once through the subword tokenizer). With ``--rounds N`` every setup is measured N
times, interleaved, and the best round is kept ("worst round" shows the spread). "sentences/CPU-s" divides
by the CPU time of the process and its finished pool workers instead of wall time: on a shared machine
it is less sensitive to time taken by other work, and shows what the multi-core rows cost.
Memory rows load the model in a fresh process and encode the sentences once: RSS after the imports,
after loading, and peak RSS (``ru_maxrss``), next to the model's size on disk.
Correctness: staticsem with workers=2 must return exactly the array of workers=1. Nothing is asserted.

Run (builds and caches the models in benchmarks/.models the first time)::

    python benchmarks/encode_speed.py --rounds 3 --output benchmarks/results/encode_speed.json
    python benchmarks/encode_speed.py --sentences 2000 --repeats 1     # quick check
    python benchmarks/encode_speed.py --languages all --model ml=MODEL --model2vec ml=M2V_FOLDER \
        --sentences 5000 --output benchmarks/results/encode_speed_languages.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from argparse import SUPPRESS
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common as common
import _speed_languages

# (label, child kind, workers or use_multiprocessing, pinned single thread)
SPEED_RUNS: list[tuple[str, str, int, bool]] = [
    ("staticsem workers=1", "staticsem", 1, True),
    ("staticsem workers=2", "staticsem", 2, False),
    ("model2vec use_multiprocessing=False", "model2vec", 0, True),
    ("model2vec default encode()", "model2vec", 1, False),
    ("ST StaticEmbedding batch_size=1024", "st", 0, True),
    ("ST StaticEmbedding batch_size=1024", "st", 0, False),
    ("staticsem imported model2vec workers=1", "staticsem-m2v", 1, True),
]
BASELINE = "model2vec use_multiprocessing=False"
IMPORTED = "staticsem imported model2vec workers=1"
BASELINE_SRC = " (baseline src)"


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` value (VmRSS, Threads, ...)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return -1


def _cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its finished children (pool workers)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def child(
    kind: str,
    model_path: str,
    data: Path,
    count: int,
    repeats: int,
    setting: int,
    pinned: bool,
    language: str = "en",
) -> None:
    """Measure one configuration in this (fresh) process and print one JSON line."""
    if pinned:
        os.sched_setaffinity(0, {0})
    import resource

    import numpy as np

    sentences = common.read_sentences(data, count, language)
    rss_start = _status_kib("VmRSS")
    check: Callable[[np.ndarray], Any] | None = None
    if "staticsem" in kind:
        import staticsem

        rss_import = _status_kib("VmRSS")
        folder, _, mode = model_path.partition("#")  # DIR#query: that mode's encoding
        model = staticsem.load(folder) if not mode else staticsem.load(folder).for_mode(mode)
        run: Callable[[], np.ndarray] = lambda: model.encode(sentences, workers=setting)  # noqa: E731
        if setting > 1:
            check = lambda out: np.array_equal(out, model.encode(sentences, workers=1))  # noqa: E731
    elif "model2vec" in kind:
        from model2vec import StaticModel

        rss_import = _status_kib("VmRSS")
        m2v = StaticModel.from_pretrained(model_path)
        run = lambda: m2v.encode(sentences, use_multiprocessing=bool(setting))  # noqa: E731
    else:
        import torch
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, StaticEmbedding

        if pinned:
            torch.set_num_threads(1)
        rss_import = _status_kib("VmRSS")
        modules: list[torch.nn.Module] = [StaticEmbedding.from_model2vec(model_path), Normalize()]
        st = SentenceTransformer(modules=modules, device="cpu")
        run = lambda: st.encode(sentences, batch_size=1024)  # noqa: E731
    rss_load = _status_kib("VmRSS")
    started = time.perf_counter()
    out = run()
    cold = time.perf_counter() - started
    result: dict[str, Any] = {
        "rss_start_kib": rss_start,
        "rss_import_kib": rss_import,
        "rss_load_kib": rss_load,
        "cold_s": cold,
        "sentences": len(sentences),
        "chars": sum(map(len, sentences)),
        "shape": list(out.shape),
        "dtype": str(out.dtype),
    }
    if kind.startswith("rss-"):
        result["peak_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    else:
        times, cpu = [], []
        for _ in range(repeats):
            started, cpu_started = time.perf_counter(), _cpu_seconds()
            out = run()
            times.append(time.perf_counter() - started)
            cpu.append(_cpu_seconds() - cpu_started)
        result.update(
            times_s=times,
            best_s=min(times),
            cpu_s=cpu,
            best_cpu_s=min(cpu),
            threads=_status_kib("Threads"),
            affinity=sorted(os.sched_getaffinity(0)),
        )
        if check is not None:
            result["identical_to_workers1"] = check(out)
    print("RESULT " + json.dumps(result), flush=True)


def spawn(
    kind: str,
    model: Path,
    args: Any,
    setting: int,
    pinned: bool,
    src: Path | None = None,
    language: str = "en",
) -> dict[str, Any]:
    """Run ``child`` in a fresh interpreter (with ``src`` first on its path) over the corpus of
    ``language`` and return its JSON result."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(common.ONE_THREAD_ENV if pinned else {})}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--child-model",
        str(model),
        "--data",
        str(args.data),
        "--sentences",
        str(args.sentences),
        "--repeats",
        str(args.repeats),
        "--child-setting",
        str(setting),
        "--child-language",
        language,
    ]
    if pinned:
        command.append("--child-pinned")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} child failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--sentences", type=int, default=20_000, help="first N corpus lines (default 20000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs after the warm-up (best is kept)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every setup this many times, interleaved, in fresh processes; the best "
        "round is kept (use 3+ on a machine shared with other work)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also measure the imported-model2vec row with the staticsem found in this folder "
        "(PYTHONPATH), e.g. /work/main/src, and print the ratio",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="also measure this staticsem model folder on one thread (repeatable), e.g. two distilled "
        "defaults against each other and model2vec",
    )
    parser.add_argument(
        "--languages",
        default=None,
        help="measure speed per language instead: all, or comma-separated codes (en is always the base)",
    )
    parser.add_argument(
        "--model2vec",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="with --languages: also measure this model2vec folder (repeatable)",
    )
    parser.add_argument("--child", help=SUPPRESS)
    parser.add_argument("--child-language", default="en", help=SUPPRESS)
    parser.add_argument("--child-model", help=SUPPRESS)
    parser.add_argument("--child-setting", type=int, default=0, help=SUPPRESS)
    parser.add_argument("--child-pinned", action="store_true", help=SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(
            args.child,
            args.child_model,
            args.data,
            args.sentences,
            args.repeats,
            args.child_setting,
            args.child_pinned,
            args.child_language,
        )
        return
    common.offline()
    if args.languages:
        _speed_languages.run(args, spawn)
        return
    _, staticsem_path = common.build_staticsem(args.models, args.data)
    m2v_path = common.build_model2vec(args.models)
    paths = {"staticsem": staticsem_path, "model2vec": m2v_path, "st": m2v_path, "staticsem-m2v": m2v_path}
    runs = [(*run, None, paths[run[1]]) for run in SPEED_RUNS]
    if args.baseline_src is not None:
        same = [run for run in SPEED_RUNS if run[0] == IMPORTED]
        runs += [(label + BASELINE_SRC, *rest, args.baseline_src, paths[rest[0]]) for label, *rest in same]
    for spec in args.model:
        label, _, folder = spec.partition("=")
        runs.append((f"staticsem {label} workers=1", "staticsem", 1, True, None, Path(folder)))

    rounds: list[list[dict[str, Any]]] = [[] for _ in runs]
    for number in range(1, args.rounds + 1):
        for (label, kind, setting, pinned, src, path), results in zip(runs, rounds, strict=True):
            where = "1 thread, core 0" if pinned else "default threads"
            print(f"[round {number}/{args.rounds}] measuring {label} ({where}) ...", flush=True)
            results.append(spawn(kind, path, args, setting, pinned, src))
    speed: list[dict[str, Any]] = []
    for (label, _, _, pinned, _, _), results in zip(runs, rounds, strict=True):
        best = min(results, key=lambda r: r["best_s"])
        speed.append(
            {
                "label": label,
                "single_thread": pinned,
                **best,
                "rounds": results,
                "sentences_per_s": args.sentences / best["best_s"],
                "worst_round_sentences_per_s": args.sentences / max(r["best_s"] for r in results),
                "cold_sentences_per_s": args.sentences / min(r["cold_s"] for r in results),
                "sentences_per_cpu_s": args.sentences / min(r["best_cpu_s"] for r in results),
            }
        )
    base = next(r for r in speed if r["label"] == BASELINE and r["single_thread"])
    for row in speed:
        row["ratio_vs_model2vec_1thread"] = row["sentences_per_s"] / base["sentences_per_s"]
        row["cpu_ratio_vs_model2vec_1thread"] = row["sentences_per_cpu_s"] / base["sentences_per_cpu_s"]

    memory: list[dict[str, Any]] = []
    for name in ("staticsem", "model2vec"):
        print(f"measuring memory of {name} ...", flush=True)
        path = paths[name]
        result = spawn(f"rss-{name}", path, args, 0 if name == "model2vec" else 1, True)
        memory.append(
            {
                "model": name,
                "path": str(path),
                "folder_bytes": common.folder_bytes(path),
                "safetensors_bytes": (path / "model.safetensors").stat().st_size,
                **result,
            }
        )

    print_results(args.sentences, speed, memory)
    baseline_row = next((r for r in speed if r["label"] == IMPORTED + BASELINE_SRC), None)
    if baseline_row is not None:
        imported = next(r for r in speed if r["label"] == IMPORTED)
        ratio = imported["sentences_per_s"] / baseline_row["sentences_per_s"]
        cpu_ratio = imported["sentences_per_cpu_s"] / baseline_row["sentences_per_cpu_s"]
        print(
            f"imported model2vec, this staticsem vs {args.baseline_src}: {ratio:.3f}x sentences/s, "
            f"{cpu_ratio:.3f}x sentences/CPU-s"
        )
    check = next(r["identical_to_workers1"] for r in speed if "identical_to_workers1" in r)
    print(f"correctness: staticsem workers=2 output identical to workers=1: {check}")
    common.save_json(
        args.output,
        {
            "benchmark": "encode_speed",
            "date": time.strftime("%Y-%m-%d"),
            "cpu_count": os.cpu_count(),
            "sentences": args.sentences,
            "repeats": args.repeats,
            "rounds": args.rounds,
            "versions": versions(),
            "speed": speed,
            "memory": memory,
            "workers2_identical": check,
            "baseline_src": None if args.baseline_src is None else str(args.baseline_src),
        },
    )


def print_results(count: int, speed: list[dict[str, Any]], memory: list[dict[str, Any]]) -> None:
    """The throughput and memory tables."""
    rows = [
        [
            r["label"],
            "1 (core 0)" if r["single_thread"] else "default",
            f"{r['sentences_per_s']:,.0f}",
            f"{r['ratio_vs_model2vec_1thread']:.2f}x",
            f"{r['worst_round_sentences_per_s']:,.0f}",
            f"{r['cold_sentences_per_s']:,.0f}",
            f"{r['sentences_per_cpu_s']:,.0f}",
            f"{r['cpu_ratio_vs_model2vec_1thread']:.2f}x",
            str(r["threads"]),
        ]
        for r in speed
    ]
    common.print_table(
        f"Encoding {count:,} Wikipedia sentences (best of repeats after warm-up, best round)",
        [
            "setup",
            "threads",
            "sentences/s",
            "vs model2vec 1-thread",
            "worst round",
            "cold (1st call)",
            "sentences/CPU-s",
            "CPU vs model2vec",
            "OS threads",
        ],
        rows,
    )
    mem_rows = [
        [
            m["model"],
            common.mib(m["safetensors_bytes"]),
            common.mib(m["folder_bytes"]),
            common.mib(m["rss_import_kib"] * 1024),
            common.mib(m["rss_load_kib"] * 1024),
            common.mib(m["peak_rss_kib"] * 1024),
        ]
        for m in memory
    ]
    common.print_table(
        f"Memory: fresh process, load + encode {count:,} sentences once",
        ["model", "model.safetensors", "folder on disk", "RSS after import", "RSS after load", "peak RSS"],
        mem_rows,
    )


def versions() -> dict[str, str]:
    """Versions of the libraries compared."""
    from importlib.metadata import version

    return {
        name: version(name)
        for name in ("staticsem", "model2vec", "sentence-transformers", "numpy", "tokenizers", "torch")
    }


if __name__ == "__main__":
    main()
