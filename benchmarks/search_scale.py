"""staticsem.search at scale: build and query the Wikipedia sentences, tantivy and vicinity in the same run.

Every phase runs in a fresh subprocess (its own peak RSS), on the first ``--limit`` (default: all 1.49 M)
sentences of ``--data``'s corpus, one document each:

* ``build``: our ``Index.build`` from the gzip files (encode + tantivy + vector segments built side by side),
  its size on disk, segments, and how many of 20,000 sampled vectors their own search (as ``Index.search``
  does it) does not reach (usearch's concurrent ``add`` strands nodes, USearch#735: we build each graph on
  one thread; a graph still strands a few, which the build finds and serves from a flat segment);
* ``vectors``: the same model's vectors and exact float32 top-10 for the queries;
* ``vicinity``: model2vec's nearest-neighbour library (usearch backend, its defaults, every core) built
  from those vectors, its recall and latency;
* ``tantivy``: tantivy used directly (``en_stem`` text field, an integer key, a writer on every core,
  queries through ``parse_query_lenient``), its build time and BM25 latency;
* ``query``: our index read-only: dense recall@10 against exact search, single-thread latency (p50 / p99,
  k = 10) of the vector search, of ``Index.search`` in each mode (text in, rows out) and of the lexical
  engine alone on the same queries as tantivy; then, opened for writing, one-document adds and deletes.

Queries: STS-B dev sentences (``--queries`` for dense, ``--bm25-queries`` for BM25 and hybrid).

Run::

    python benchmarks/search_scale.py --output benchmarks/results/search_scale.json
    python benchmarks/search_scale.py --limit 500000 --output benchmarks/results/search_scale_500k.json

Without ``--model`` the benchmarks' token model (30k words x 256, float16; built by ``_common`` in
about a minute) is used: what is measured is the index, and any staticsem model encodes alike.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

HYBRID_EXPANSIONS = (64, 128, 256)
EFS = (64, 256, 320, 400, 512)  # usearch's default (vicinity keeps it), then wider searches
CORPUS_FILES = [f"corpus/enwiki2015-sentences-0{i}.txt.gz" for i in range(3)]
PHASES = ("build", "vectors", "tantivy", "vicinity", "query")
WRITES = 50  # one-document adds, then deletes, timed at the end


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    parser.add_argument("--model", type=Path, default=None, help="staticsem model (default: the token model)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N sentences")
    parser.add_argument("--queries", type=int, default=1000, help="how many query sentences")
    parser.add_argument("--bm25-queries", type=int, default=300, help="queries for the BM25/hybrid latency")
    parser.add_argument("--phase", default=None, help="internal: run one measured phase and print its JSON")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help="run only these phases, keeping --output's results of the others (each is saved when done)",
    )
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


def unreached(snapshot: Any, sample: int = 20_000) -> dict[str, int]:
    """Sampled indexed vectors whose search (k=10, our default expansion, every segment, as ``Index.search``
    does) finds neither them nor an identical vector; stranded ones are served by a flat segment."""
    rng = np.random.default_rng(0)
    total = len(snapshot)
    missed = sampled = 0
    for segment in snapshot.segments:
        live = segment.keys[~np.isin(segment.keys, snapshot.dead.get(segment.name, []))]
        take = max(1, round(sample * len(live) / total))
        keys = rng.choice(live, min(take, len(live)), replace=False)
        for key, row in zip(keys, segment.vectors(keys), strict=True):
            found = snapshot.search(row, 10)
            missed += int(all(k != key for k, _ in found) and not (found and found[0][1] > 1 - 1e-3))
        sampled += len(keys)
    return {"unreached": missed, "sampled": sampled}


def top10(scores: np.ndarray) -> np.ndarray:
    """The 10 best rows by score, best first (argpartition, then sort those ten)."""
    best = np.argpartition(-scores, 10)[:10]
    return best[np.argsort(-scores[best], kind="stable")]


def tantivy_direct(args: Any, queries: list[str]) -> dict[str, Any]:
    """tantivy on its own: en_stem text, integer key, every core to index, lenient query parsing."""
    import tantivy

    folder = args.models / "search" / "scale" / "tantivy"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name="en_stem")
    builder.add_integer_field("key", indexed=True, fast=True)
    index = tantivy.Index(builder.build(), path=str(folder))
    started = time.perf_counter()
    writer = index.writer(heap_size=256_000_000, num_threads=os.cpu_count() or 1)
    for key, doc in enumerate(corpus(args.data, args.limit), 1):
        writer.add_document(tantivy.Document(text=doc.text, key=key))
    writer.commit()
    writer.wait_merging_threads()
    seconds = time.perf_counter() - started
    index.reload()
    searcher = index.searcher()

    def search(text: str) -> list[int]:
        query, _ = index.parse_query_lenient(text, ["text"])
        hits = searcher.search(query, 10, count=False).hits
        return searcher.fast_field_values("key", [address for _, address in hits])  # type: ignore[return-value]

    return {
        "build_seconds": seconds,
        "bytes_on_disk": common.folder_bytes(folder),
        "bm25": latencies(search, queries),
        "peak_rss_mib": peak_rss_mib(),
    }


def writes(index: Any, texts: list[str]) -> dict[str, Any]:
    """One-document adds (each tagged, then found by a filtered search), then deletes of the same
    documents, each its own write."""
    adds = latencies(
        lambda i: index.add([{"id": f"write-{i}", "text": texts[i % len(texts)], "probe": str(i)}]),
        range(WRITES),
    )
    found = sum(
        [h.id for h in index.search(texts[i % len(texts)], 1, mode="bm25", where={"probe": str(i)})]
        == [f"write-{i}"]
        for i in range(WRITES)
    )
    deletes = latencies(lambda i: index.delete([f"write-{i}"]), range(WRITES))
    return {"add": adds, "delete": deletes, "adds found": found, "writes": WRITES}


def truth_key(args: Any) -> dict[str, Any]:
    """What the stored vectors and exact top-10 depend on."""
    return {"model": str(args.model), "limit": args.limit, "queries": args.queries, "data": str(args.data)}


def phase(args: Any) -> dict[str, Any]:
    """One measured step of ``scale``, in its own process."""
    import staticsem

    work = args.models / "search" / "scale"
    vectors_file, truth_file, made_for = work / "vectors.npy", work / "truth.npy", work / "truth.json"
    model = staticsem.load(args.model)
    queries = query_sentences(args.data, args.queries)
    bm25_queries = queries[: args.bm25_queries]
    query_vectors = model.encode(queries)
    if args.phase == "build":
        from staticsem.search import Index

        started = time.perf_counter()
        with Index.build(model, corpus(args.data, args.limit), work / "index", show_progress=True) as index:
            seconds, info = time.perf_counter() - started, index.info()
            reach = unreached(index.snapshot)
        return {
            "seconds": seconds,
            "documents": info["documents"],
            "docs_per_s": info["documents"] / seconds,
            "bytes_on_disk": info["bytes_on_disk"],
            "segments": info["segments"],
            **reach,
            "peak_rss_mib": peak_rss_mib(),
        }
    if args.phase == "tantivy":
        return tantivy_direct(args, bm25_queries)
    if args.phase == "vectors":
        started = time.perf_counter()
        texts = [d.text for d in corpus(args.data, args.limit)]
        vectors = model.encode(texts)
        seconds = time.perf_counter() - started
        np.save(vectors_file, vectors)
        truth = np.vstack([top10(vectors @ q) for q in query_vectors])
        np.save(truth_file, truth)
        made_for.write_text(json.dumps(truth_key(args)))
        return {"encode_seconds": seconds, "sentences": len(texts), "sentences_per_s": len(texts) / seconds}
    made = json.loads(made_for.read_text()) if made_for.is_file() else None
    if made != truth_key(args):  # a vectors phase of another run would give a meaningless recall
        raise SystemExit(f"{truth_file} was made for {made}, not {truth_key(args)}: run the vectors phase")
    truth = np.load(truth_file)
    if args.phase == "vicinity":
        from vicinity import Backend, Vicinity

        vectors = np.load(vectors_file, mmap_mode="r")
        keep = np.flatnonzero(np.any(np.asarray(vectors), axis=1))  # zero rows are not indexed by either
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
        }
        for ef in EFS:  # the same search effort as ours at each
            vicinity.backend.index.expansion_search = ef
            found = [np.array([item for item, _ in vicinity.query(q[None], k=10)[0]]) for q in query_vectors]
            out[f"recall@10 ef={ef}"] = recall(found, truth)
            out[f"query ef={ef}"] = latencies(lambda q: vicinity.query(q[None, :], k=10), query_vectors)
        return {**out, "peak_rss_mib": peak_rss_mib()}
    if args.phase == "query":
        return query_phase(args, queries, query_vectors, truth)
    raise SystemExit(f"unknown phase {args.phase}")


def query_phase(
    args: Any, queries: list[str], query_vectors: np.ndarray, truth: np.ndarray
) -> dict[str, Any]:
    """Our index read-only: recall and latency per search breadth, each mode on one thread and on every
    core, hybrid's dense-side breadth against the full one; then one-document writes."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    import staticsem
    from staticsem.search import Index

    model, bm25_queries = staticsem.load(args.model), queries[: args.bm25_queries]
    index = Index.open(args.models / "search" / "scale" / "index", model, read_only=True)
    snapshot, cores = index.snapshot, index.query_threads
    out: dict[str, Any] = {"segments": len(snapshot.segments), "hnsw": index.info()["hnsw"], "cores": cores}
    graphs = [segment for segment in snapshot.segments if segment.index is not None]
    pool = ThreadPoolExecutor(max(2, cores), "bench-segments")  # as the index's own segment pool
    for ef in EFS:  # usearch's expansion_search: the recall / latency trade
        for segment in graphs:
            segment.index.expansion_search = ef
        # keys are 1-based document keys in corpus order (no ids given)
        found = [np.array([key - 1 for key, _ in snapshot.search(q, 10)]) for q in query_vectors]
        out[f"recall@10 ef={ef}"] = recall(found, truth)
        out[f"vector search ef={ef}"] = latencies(lambda q: snapshot.search(q, 10), query_vectors)
        out[f"vector search ef={ef}, segments side by side"] = latencies(
            lambda q: snapshot.search(q, 10, pool=pool), query_vectors
        )
    for segment in graphs:
        segment.index.expansion_search = index.hnsw.expansion_search
    out["lexical engine alone"] = latencies(lambda q: index.lexical.search(q, 10), bm25_queries)
    for threads in (1, cores):
        index.query_threads = threads
        out[f"Index.search dense, {threads} thread(s)"] = latencies(
            lambda q: index.search(q, 10, mode="dense"), queries
        )
        for mode in ("bm25", "hybrid"):
            out[f"Index.search {mode}, {threads} thread(s)"] = latencies(
                lambda q, m=mode: index.search(q, 10, mode=m), bm25_queries
            )
    default = index.hnsw
    index.hnsw = replace(default, hybrid_expansion=default.expansion_search)
    full = [[h.id for h in index.search(q, 10)] for q in bm25_queries]
    for breadth in HYBRID_EXPANSIONS:  # hybrid's dense side: narrower searches, their cost and effect
        index.hnsw = replace(default, hybrid_expansion=breadth)
        hits = [[h.id for h in index.search(q, 10)] for q in bm25_queries]
        out[f"hybrid dense side at {breadth}"] = {
            **latencies(lambda q: index.search(q, 10), bm25_queries),
            "top-10 overlap with the full breadth": float(
                np.mean([len(set(a) & set(b)) / max(len(b), 1) for a, b in zip(hits, full, strict=True)])
            ),
        }
    index.hnsw = default
    index.close()
    pool.shutdown()
    with Index.open(args.models / "search" / "scale" / "index", model) as writable:
        out["writes"] = writes(writable, bm25_queries)
    out["peak_rss_mib"] = peak_rss_mib()
    return out


def scale(args: Any) -> dict[str, Any]:
    (args.models / "search" / "scale").mkdir(parents=True, exist_ok=True)
    settings = {"limit": args.limit, "queries": args.queries, "bm25": args.bm25_queries}
    results: dict[str, Any] = dict(settings)
    if args.output is not None and args.output.is_file():
        earlier = json.loads(args.output.read_text())
        if {key: earlier.get(key) for key in settings} == settings:
            results = earlier
    wanted = args.phases.split(",")
    if unknown := set(wanted) - set(PHASES):
        raise SystemExit(f"unknown phases: {', '.join(sorted(unknown))}")
    for name in (p for p in PHASES if p in wanted):
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
        common.save_json(args.output, results)
    return results


def report_scale(results: dict[str, Any]) -> None:
    build, vectors, tan, vic, query = (
        results[k] for k in ("build", "vectors", "tantivy", "vicinity", "query")
    )
    n = build["documents"]
    common.print_table(
        f"Building over {n:,} Wikipedia sentences (2 cores)",
        ["what", "seconds", "per second", "on disk", "peak RSS", "unreached"],
        [
            [
                f"staticsem Index.build (encode + tantivy + {len(build['segments'])} vector segments)",
                f"{build['seconds']:.0f}",
                f"{build['docs_per_s']:,.0f} docs",
                common.mib(build["bytes_on_disk"]),
                f"{build['peak_rss_mib']:,.0f} MiB",
                f"{build['unreached']} of {build['sampled']:,}",
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
                "tantivy alone (BM25 index, every core)",
                f"{tan['build_seconds']:.0f}",
                "",
                common.mib(tan["bytes_on_disk"]),
                f"{tan['peak_rss_mib']:,.0f} MiB",
                "",
            ],
            [
                "vicinity (usearch backend, its defaults, vectors only)",
                f"{vic['build_seconds']:.0f}",
                f"{vic['vectors_per_s']:,.0f} vecs",
                common.mib(vic["bytes_on_disk"]),
                f"{vic['peak_rss_mib']:,.0f} MiB",
                "",
            ],
        ],
    )
    rows = [
        *[
            [
                f"vicinity.query (vector in, ef={ef})",
                vic[f"query ef={ef}"],
                f"{vic[f'recall@10 ef={ef}']:.4f}",
            ]
            for ef in EFS
        ],
        *[
            [
                f"staticsem segments (vector in, ef={ef})",
                query[f"vector search ef={ef}"],
                f"{query[f'recall@10 ef={ef}']:.4f}",
            ]
            for ef in EFS
        ],
        ["tantivy alone, BM25 (text in, keys out)", tan["bm25"], ""],
        ["staticsem lexical engine alone (text in, keys out)", query["lexical engine alone"], ""],
        *[
            [f"staticsem segments side by side (vector in, ef={ef})", query[side], ""]
            for ef in EFS
            if (side := f"vector search ef={ef}, segments side by side") in query
        ],
        *[
            [f"staticsem Index.search {m} (text in, rows out, {t} thread(s))", query[key], ""]
            for t in sorted({1, query.get("cores", 1)})
            for m in ("dense", "bm25", "hybrid")
            if (key := f"Index.search {m}, {t} thread(s)") in query
        ],
        *[[f"one-document {op} (a write, committed)", query["writes"][op], ""] for op in ("add", "delete")],
    ]
    for breadth in HYBRID_EXPANSIONS:
        if (side := query.get(f"hybrid dense side at {breadth}")) is not None:
            overlap = side["top-10 overlap with the full breadth"]
            rows.append([f"hybrid, dense side at {breadth} (overlap@10 with full: {overlap:.3f})", side, ""])
    common.print_table(
        f"Queries: STS-B sentences ({results['queries']} dense, {results['bm25']} BM25/hybrid), k=10",
        ["what", "p50 ms", "p99 ms", "per second", "recall@10"],
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
    if all(name in results for name in PHASES):
        report_scale(results)


if __name__ == "__main__":
    main()
