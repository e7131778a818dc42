"""Retrieval in the BEIR layout: nDCG@10 and recall@100 of cosine ranking (×100).

A dataset folder holds ``corpus.jsonl`` (``{_id, title, text}``), ``queries.jsonl`` (``{_id, text}``) and
``qrels/SPLIT.tsv`` (header row, then query-id, corpus-id, score). Documents are encoded as
``title + " " + text`` (as BEIR and MTEB do), queries and documents in their modes (``encode_query`` and
``encode_document`` where the encoder has them); only queries with a judgement are scored. nDCG uses the
linear gain of ``trec_eval`` (the relevance score itself), so binary judgements give the usual numbers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from staticsem.errors import InputError
from staticsem.eval.base import Encoder, Evaluator, embed, with_mean

logger = logging.getLogger(__name__)
RETRIEVAL_DIRS = ("retrieval",)
SPLIT_ORDER = ("test", "dev", "train")


class Retrieval(Evaluator):
    """Rank the whole corpus for each judged query by cosine similarity.

    :param data_dir: a BEIR folder, or a folder (e.g. the data folder's ``retrieval/``) of BEIR folders.
    :param datasets: dataset folder names; default every BEIR folder found.
    :param split: qrels split; default the first of test, dev, train that exists.
    :param k: nDCG cut-off; ``depth`` is the recall cut-off.
    :returns: ``{name: nDCG@k, f"{name}_recall@{depth}": ..., "mean": mean nDCG@k}``.
    :raises InputError: on a missing or malformed file, with its path and line.
    """

    name = "retrieval"

    def __init__(
        self,
        data_dir: str | Path,
        datasets: Sequence[str] | None = None,
        *,
        split: str | None = None,
        k: int = 10,
        depth: int = 100,
    ) -> None:
        super().__init__()
        folders = _beir_folders(Path(data_dir), datasets)
        self.k, self.depth = k, depth
        self.data: dict[str, tuple[list[str], list[str], list[str], list[dict[str, float]]]] = {}
        for folder in folders:
            self.data[folder.name] = self._read(folder, split)
        self.datasets = list(self.data)
        self.settings = {
            "similarity": "cosine",
            "k": k,
            "depth": depth,
            "document": "title + ' ' + text",
            "judged_queries": {name: len(data[2]) for name, data in self.data.items()},
        }

    def _read(self, folder: Path, split: str | None) -> tuple[list[str], list[str], list[str], list[dict]]:
        corpus = _read_jsonl(folder / "corpus.jsonl")
        queries = {q["_id"]: q["text"] for q in _read_jsonl(folder / "queries.jsonl")}
        splits = [split] if split else [s for s in SPLIT_ORDER if (folder / "qrels" / f"{s}.tsv").is_file()]
        if not splits or not (folder / "qrels" / f"{splits[0]}.tsv").is_file():
            raise InputError(f"{folder / 'qrels'}: no {split or ' / '.join(SPLIT_ORDER)}.tsv")
        qrels_path = folder / "qrels" / f"{splits[0]}.tsv"
        judged: dict[str, dict[str, float]] = {}
        lines = qrels_path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines[1:], 2):
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputError(f"{qrels_path}:{number}: expected query-id, corpus-id, score")
            try:
                judged.setdefault(fields[0], {})[fields[1]] = float(fields[2])
            except ValueError:
                raise InputError(f"{qrels_path}:{number}: score {fields[2]!r} is not a number") from None
        missing = [q for q in judged if q not in queries]
        if missing:
            raise InputError(
                f"{qrels_path}: {len(missing)} judged queries not in queries.jsonl ({missing[0]}…)"
            )
        self._record(folder / "corpus.jsonl", len(corpus))
        self._record(folder / "queries.jsonl", len(queries))
        self._record(qrels_path, len(lines) - 1)
        doc_ids = [str(d["_id"]) for d in corpus]
        docs = [f"{d.get('title') or ''} {d.get('text') or ''}".strip() for d in corpus]
        query_ids = [q for q in queries if q in judged]
        return doc_ids, docs, [queries[q] for q in query_ids], [judged[q] for q in query_ids]

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for name, (doc_ids, docs, queries, judged) in self.data.items():
            ranked = _rank(embed(encoder, queries, "query"), embed(encoder, docs, "document"), self.depth)
            ndcg, recall = [], []
            for row, relevant in zip(ranked, judged, strict=True):
                ids = [doc_ids[i] for i in row]
                ndcg.append(_ndcg(ids[: self.k], relevant))
                positive = {d for d, score in relevant.items() if score > 0}
                recall.append(len(positive.intersection(ids)) / len(positive) if positive else 0.0)
            metrics[name] = 100.0 * float(np.mean(ndcg))
            metrics[f"{name}_recall@{self.depth}"] = 100.0 * float(np.mean(recall))
        return with_mean(metrics, self.datasets)


def _beir_folders(root: Path, datasets: Sequence[str] | None) -> list[Path]:
    if (root / "corpus.jsonl").is_file():
        return [root]
    for base in [*(root / sub for sub in RETRIEVAL_DIRS), root]:
        found = sorted(p.parent for p in base.glob("*/corpus.jsonl"))
        if found:
            if datasets is None:
                return found
            by_name = {p.name: p for p in found}
            unknown = [d for d in datasets if d not in by_name]
            if unknown:
                raise InputError(f"retrieval datasets {unknown} not in {base} (found {sorted(by_name)})")
            return [by_name[d] for d in datasets]
    raise InputError(f"no BEIR folder (with corpus.jsonl) in {root} or {root / 'retrieval'}")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict) or "_id" not in row:
                raise InputError(f"{path}:{number}: expected an object with an _id")
            row["_id"] = str(row["_id"])
            rows.append(row)
    return rows


def _rank(queries: np.ndarray, docs: np.ndarray, depth: int, block: int = 256) -> list[np.ndarray]:
    """Indices of the ``depth`` best documents per query, best first (ties: corpus order)."""
    depth = min(depth, len(docs))
    out: list[np.ndarray] = []
    for start in range(0, len(queries), block):
        scores = queries[start : start + block] @ docs.T
        top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        for row, candidates in zip(scores, top, strict=True):
            order = np.lexsort((candidates, -row[candidates]))
            out.append(candidates[order])
    return out


def _ndcg(ranked: list[str], relevant: dict[str, float]) -> float:
    gains = np.array([relevant.get(d, 0.0) for d in ranked])
    discounts = 1.0 / np.log2(np.arange(2, len(ranked) + 2))
    ideal = np.sort([g for g in relevant.values() if g > 0])[::-1][: len(ranked)]
    idcg = float(ideal @ discounts[: len(ideal)])
    return float(gains @ discounts) / idcg if idcg > 0 else 0.0
