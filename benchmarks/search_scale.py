"""staticsem.search at scale: build and query the 1.49 M Wikipedia sentences, vicinity in the same run.

(the 1.49 M Wikipedia sentences of ``--data``, one document each; every phase runs in a fresh
subprocess for its own peak RSS): our ``Index.build`` from the gzip files (encode + SQLite/FTS5 + HNSW),
its size on disk; the same model's vectors, from which vicinity (model2vec's nearest-neighbour library,
usearch backend, its defaults) and our vector index alone are built; then, for 1,000 STS-B dev sentences
as queries, single-thread latency (p50 / p99, k=10) of vicinity's ``query`` and of our vector search on
the same query vectors, of our whole ``Index.search`` (encode + search + SQLite rows) in each mode, and
recall@10 of both HNSW indexes against exact float32 search, and how many of 20,000 sampled indexed vectors
a search for themselves does not reach (usearch's concurrent ``add`` strands nodes: USearch#735).

Run::

    python benchmarks/search_scale.py --output benchmarks/results/search_scale.json
    python benchmarks/search_scale.py --model models/swe-wiki --limit 20000 --queries 100   # quick check

Without ``--model`` the benchmarks' token model (30k words x 256, float16; built by ``_common`` in
about a minute) is used: what is measured here is the index, and any staticsem model encodes alike.
"""

from __future__ import annotations

import itertools
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

COMMON_DF = (1.0, 0.5, 0.2)
EFS = (64, 256, 320)  # usearch's default (vicinity keeps it), then wider searches up to ours
CORPUS_FILES = [f"corpus/enwiki2015-sentences-0{i}.txt.gz" for i in range(3)]


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    parser.add_argument("--model", type=Path, default=None, help="staticsem model (default: the token model)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N sentences")
    parser.add_argument("--queries", type=int, default=1000, help="how many query sentences")
    parser.add_argument("--bm25-queries", type=int, default=200, help="queries for the BM25/hybrid latency")
    parser.add_argument("--phase", default=None, help="internal: run one measured phase and print its JSON")
    return parser.parse_args()


def corpus(data: Path, limit: int | None):
    from staticsem.search import read_documents

    docs = itertools.chain.from_iterable(read_documents(str(data / name)) for name in CORPUS_FILES)
    return itertools.islice(docs, limit)


def query_sentences(data: Path, count: int) -> list[str]:
    _, first, _ = common.read_stsb(data)
    return list(dict.fromkeys(first))[:count]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def latencies(call, items) -> dict[str, float]:  # type: ignore[no-untyped-def]
    times = []
    for item in items:
        started = time.perf_counter()
        call(item)
        times.append(time.perf_counter() - started)
    ms = 1000 * np.asarray(times)
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "queries_per_s": float(len(ms) / ms.sum() * 1000),
    }


def recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    return float(
        np.mean(
            [len(set(map(int, f)) & set(map(int, t))) / len(t) for f, t in zip(found, truth, strict=True)]
        )
    )


def unreached(usearch: Any, keys: np.ndarray, vectors: np.ndarray, sample: int = 20_000) -> dict[str, int]:
    """Indexed vectors whose own search (k=10, our default expansion for both indexes) finds neither them
    nor an identical vector."""
    from staticsem.search import HnswSettings

    usearch.expansion_search = HnswSettings().expansion_search
    rows = np.random.default_rng(0).choice(len(keys), min(sample, len(keys)), replace=False)
    found = usearch.search(np.asarray(vectors[rows], dtype=np.float32), 10, threads=2)
    reached = (found.keys == keys[rows, None]).any(axis=1) | (found.distances[:, 0] < 1e-3)
    return {"unreached": int((~reached).sum()), "sampled": len(rows)}


def top10(scores: np.ndarray) -> np.ndarray:
    """The 10 best rows by score, best first (argpartition, then sort those ten)."""
    best = np.argpartition(-scores, 10)[:10]
    return best[np.argsort(-scores[best], kind="stable")]


def phase(args: Any) -> dict[str, Any]:
    """One measured step of ``scale``, in its own process."""
    import staticsem

    work = args.models / "search" / "scale"
    vectors_file, truth_file = work / "vectors.npy", work / "truth.npy"
    model = staticsem.load(args.model)
    queries = query_sentences(args.data, args.queries)
    query_vectors = model.encode(queries)
    if args.phase == "build":
        from staticsem.search import Index

        started = time.perf_counter()
        with Index.build(model, corpus(args.data, args.limit), work / "index", show_progress=True) as index:
            seconds, info = time.perf_counter() - started, index.info()
        return {
            "seconds": seconds,
            "documents": info["documents"],
            "docs_per_s": info["documents"] / seconds,
            "bytes_on_disk": info["bytes_on_disk"],
            "peak_rss_mib": peak_rss_mib(),
        }
    if args.phase == "vectors":
        started = time.perf_counter()
        texts = [d.text for d in corpus(args.data, args.limit)]
        vectors = model.encode(texts)
        seconds = time.perf_counter() - started
        np.save(vectors_file, vectors)
        truth = np.vstack([top10(vectors @ q) for q in query_vectors])
        np.save(truth_file, truth)
        return {"encode_seconds": seconds, "sentences": len(texts), "sentences_per_s": len(texts) / seconds}
    vectors = np.load(vectors_file, mmap_mode="r")
    truth = np.load(truth_file)
    keep = np.flatnonzero(np.any(np.asarray(vectors), axis=1))  # zero rows are not indexed by either
    if args.phase == "vicinity":
        from vicinity import Backend, Vicinity

        started = time.perf_counter()
        vicinity = Vicinity.from_vectors_and_items(
            np.asarray(vectors[keep]), keep.tolist(), backend_type=Backend.USEARCH
        )
        seconds = time.perf_counter() - started
        folder = work / "vicinity"
        shutil.rmtree(folder, ignore_errors=True)
        vicinity.save(folder)
        out = {
            "build_seconds": seconds,
            "vectors_per_s": len(keep) / seconds,
            "bytes_on_disk": common.folder_bytes(folder),
            **unreached(vicinity.backend.index, np.arange(len(keep), dtype=np.uint64), vectors[keep]),
        }
        for ef in EFS:  # the same search effort as ours at each
            vicinity.backend.index.expansion_search = ef
            found = [np.array([item for item, _ in vicinity.query(q[None], k=10)[0]]) for q in query_vectors]
            out[f"recall@10 ef={ef}"] = recall(found, truth)
            out[f"query ef={ef}"] = latencies(lambda q: vicinity.query(q[None, :], k=10), query_vectors)
        return {**out, "peak_rss_mib": peak_rss_mib()}
    if args.phase == "vectors-only":
        from staticsem.search import HnswSettings
        from staticsem.search.vectors import DEFAULT_DTYPE, VectorIndex

        index = VectorIndex(model.dim, DEFAULT_DTYPE, HnswSettings())
        started = time.perf_counter()
        for start in range(0, len(keep), 65_536):
            part = keep[start : start + 65_536]
            index.add(part, np.asarray(vectors[part]))
        seconds = time.perf_counter() - started
        out = {
            "build_seconds": seconds,
            "vectors_per_s": len(keep) / seconds,
            "add_threads": index.settings.add_threads,
            **unreached(index.index, keep.astype(np.uint64), vectors[keep]),
        }
        for ef in EFS:
            index.index.expansion_search = ef
            found = [np.array([key for key, _ in index.search(q, 10)]) for q in query_vectors]
            out[f"recall@10 ef={ef}"] = recall(found, truth)
            out[f"query ef={ef}"] = latencies(lambda q: index.search(q, 10), query_vectors)
        return {**out, "peak_rss_mib": peak_rss_mib()}
    if args.phase == "query":
        from staticsem.search import Index

        index = Index.open(work / "index", model, read_only=True)
        # keys are 1-based document keys in corpus order (no ids given)
        found = [np.array([key - 1 for key, _ in index.vectors.search(q, 10)]) for q in query_vectors]
        out = {
            "recall@10": recall(found, truth),
            "vector search": latencies(lambda q: index.vectors.search(q, 10), query_vectors),
        }
        for ef in EFS:  # usearch's expansion_search: the recall / latency trade
            index.vectors.index.expansion_search = ef
            found = [np.array([key - 1 for key, _ in index.vectors.search(q, 10)]) for q in query_vectors]
            out[f"recall@10 ef={ef}"] = recall(found, truth)
            out[f"vector search ef={ef}"] = latencies(lambda q: index.vectors.search(q, 10), query_vectors)
        index.vectors.index.expansion_search = index.hnsw.expansion_search
        out["Index.search dense"] = latencies(lambda q: index.search(q, 10, mode="dense"), queries)
        for common_df in COMMON_DF:  # exact BM25 scores every document holding any query word: slow
            index.store.common_df = common_df
            for mode in ("bm25", "hybrid"):
                out[f"Index.search {mode} common_df={common_df}"] = latencies(
                    lambda q, m=mode: index.search(q, 10, mode=m), queries[: args.bm25_queries]
                )
        out["peak_rss_mib"] = peak_rss_mib()
        return out
    raise SystemExit(f"unknown phase {args.phase}")


def scale(args: Any) -> dict[str, Any]:
    (args.models / "search" / "scale").mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"limit": args.limit, "queries": args.queries, "bm25": args.bm25_queries}
    for name in ("build", "vectors", "vicinity", "vectors-only", "query"):
        options = {
            "model": args.model or common.build_staticsem(args.models, args.data)[1],
            "data": args.data,
            "models": args.models,
            "queries": args.queries,
            "bm25-queries": args.bm25_queries,
            "limit": args.limit,
        }
        command = [sys.executable, __file__, "--phase", name]
        command += [item for key, value in options.items() if value for item in (f"--{key}", str(value))]
        print(f"phase {name} ...", flush=True)
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(results[name]), flush=True)
    return results


def searches(query: dict[str, Any]) -> list[tuple[str, dict[str, float]]]:
    return [(k.removeprefix("Index.search "), v) for k, v in query.items() if k.startswith("Index.search")]


def reached(part: dict[str, Any]) -> str:
    return f"{part['unreached']} of {part['sampled']:,}" if "unreached" in part else ""


def report_scale(results: dict[str, Any]) -> None:
    build, vectors, vic, ours, query = (
        results[k] for k in ("build", "vectors", "vicinity", "vectors-only", "query")
    )
    n = build["documents"]
    common.print_table(
        f"Building over {n:,} Wikipedia sentences (2 cores)",
        ["what", "seconds", "per second", "on disk", "peak RSS", "unreached"],
        [
            [
                "staticsem Index.build (encode + SQLite/FTS5 + HNSW)",
                f"{build['seconds']:.0f}",
                f"{build['docs_per_s']:,.0f} docs",
                common.mib(build["bytes_on_disk"]),
                f"{build['peak_rss_mib']:,.0f} MiB",
                "",
            ],
            [
                "  encode alone (1 process)",
                f"{vectors['encode_seconds']:.0f}",
                f"{vectors['sentences_per_s']:,.0f} sents",
                "",
                "",
                "",
            ],
            [
                "staticsem vector index alone (default dtype, HNSW)",
                f"{ours['build_seconds']:.0f}",
                f"{ours['vectors_per_s']:,.0f} vecs",
                "",
                f"{ours['peak_rss_mib']:,.0f} MiB",
                reached(ours),
            ],
            [
                "vicinity (usearch backend, its defaults)",
                f"{vic['build_seconds']:.0f}",
                f"{vic['vectors_per_s']:,.0f} vecs",
                common.mib(vic["bytes_on_disk"]),
                f"{vic['peak_rss_mib']:,.0f} MiB",
                reached(vic),
            ],
        ],
    )
    rows = [
        *[
            [f"{name} (vector in, ef={ef})", part[f"query ef={ef}"], f"{part[f'recall@10 ef={ef}']:.4f}"]
            for ef in EFS
            for name, part in (("vicinity.query", vic), ("staticsem vector index", ours))
        ],
        [
            "staticsem Index vectors, read-only view (vector in)",
            query["vector search"],
            f"{query['recall@10']:.4f}",
        ],
        *[[f"staticsem Index.search {m} (text in, rows out)", t, ""] for m, t in searches(query)],
    ]
    common.print_table(
        f"Queries: {results['queries']} STS-B sentences, k=10, one thread; recall@10 vs exact float32 search",
        ["what", "p50 ms", "p99 ms", "queries/s", "recall@10"],
        [
            [name, f"{t['p50_ms']:.3f}", f"{t['p99_ms']:.3f}", f"{t['queries_per_s']:,.0f}", r]
            for name, t, r in rows
        ],
    )


def main() -> None:
    args = parse_args()
    common.offline()
    if args.phase:
        print(json.dumps(phase(args)))
        return
    results = scale(args)
    report_scale(results)
    common.save_json(args.output, results)


if __name__ == "__main__":
    main()
