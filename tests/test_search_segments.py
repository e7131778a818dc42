"""staticsem.search at scale: segments, tombstones and merges, the lexical engine's rules, reachability,
format migration and Parquet export (small data made here)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import ModelFormatError
from staticsem.search import HnswSettings, Index
from staticsem.search.common import model_sha256
from staticsem.search.vectors import plan_merge, plan_optimize

WORDS = ["cat", "kitten", "dog", "puppy", "king", "queen", "crown", "bread", "cheese", "soup", "palace"]


@pytest.fixture(scope="module")
def model() -> StaticModel:
    rng = np.random.default_rng(7)
    return StaticModel(WORDS, rng.normal(size=(len(WORDS), 16)).astype(np.float32))


def ids(hits: list) -> list[str]:
    return [hit.id for hit in hits]


def texts(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, 3)) for _ in range(count)]


# ---------------------------------------------------------------------- reachability
@pytest.mark.slow
def test_every_vector_finds_itself_after_a_build_on_every_core(tmp_path: Path) -> None:
    """30,000 distinct vectors, segments built side by side: each one's search finds it first."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30_000)]
    big = StaticModel(words, rng.normal(size=(len(words), 24)).astype(np.float32))
    index = Index.build(big, words, tmp_path / "ix", dtype="float32")
    segments = index.snapshot.segments
    assert sum(len(s) for s in segments) == len(words)
    assert sum(s.index is not None for s in segments) >= 2  # one graph per core (CI: two)
    for segment in segments:  # a stranded node is found at no expansion (usearch's concurrent add, planted:
        if segment.index is not None:  # 4 of 30,000 at 64, 128 and 320); 64 keeps the check quick
            segment.index.expansion_search = 64
            found = segment.index.search(segment.vectors(segment.keys), 1, exact=False, threads=0)
            assert (found.keys[:, 0] == segment.keys).all(), f"{segment.name}: unreached vectors"


def test_vectors_a_graph_strands_move_to_a_flat_segment(tmp_path: Path) -> None:
    """A sparse graph (4 links, expansion 8 on add) strands many nodes: they are buried in it and served by
    a flat segment, each vector is served once, and every vector's search finds it first (the search
    expansion, 64, is above what a search over tombstones asks for: usearch searches at the larger)."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(4_000)]
    model = StaticModel(words, rng.normal(size=(len(words), 32)).astype(np.float32))
    sparse = HnswSettings(connectivity=4, expansion_add=8, expansion_search=64, exact_threshold=500)
    index = Index.build(model, words, tmp_path / "ix", dtype="float32", hnsw=sparse)
    segments = index.snapshot.segments
    graphs, flats = [s for s in segments if s.index is not None], [s for s in segments if s.index is None]
    assert graphs and len(flats) == 1 and len(flats[0]) > 0
    dead = index.snapshot.dead
    served = np.concatenate([s.keys[~np.isin(s.keys, dead.get(s.name, []))] for s in segments])
    assert len(served) == len(np.unique(served)) == len(words) == len(index.snapshot)
    assert sum(len(dead.get(g.name, [])) for g in graphs) == len(flats[0])
    vectors = model.encode(words)
    first = [index.snapshot.search(row, 10)[0][0] for row in vectors]  # k = 10: the stray check's k
    assert first == list(range(1, len(words) + 1))
    reopened = Index.open(tmp_path / "ix", model=model)
    assert [hit.text for hit in reopened.search(words[7], 1, mode="dense")] == [words[7]]
    everyone = np.arange(1, len(words) + 1)  # exact search among a filter's documents: each one once
    for key in flats[0].keys[:20]:
        found = [k for k, _ in index.snapshot.search_among(vectors[key - 1], everyone, 10)]
        assert found[0] == key and len(set(found)) == len(found) == 10


def test_identical_vectors_a_graph_strands_are_served_too(tmp_path: Path) -> None:
    """HNSW strands many of a large group of identical vectors (300 copies of one document in a graph of
    400: a search for 300 found 112); a search still finds every copy."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(101)]
    model = StaticModel(words, rng.normal(size=(len(words), 16)).astype(np.float32))
    docs = ["w0"] * 300 + words[1:]
    index = Index.build(model, docs, tmp_path / "ix", dtype="float32", hnsw=HnswSettings(exact_threshold=50))
    assert any(s.index is not None for s in index.snapshot.segments)
    hits = index.search("w0", 300, mode="dense")
    assert sorted(int(h.id) for h in hits) == list(range(1, 301))


# ---------------------------------------------------------------------- the lexical side
@pytest.fixture()
def filtered(model: StaticModel, tmp_path: Path) -> Index:
    docs = [{"id": f"a{i}", "text": "cat cat cat kitten", "part": "a", "n": i} for i in range(60)]
    docs += [{"id": f"b{i}", "text": "cat dog bread", "part": "b", "flag": i % 2 == 0} for i in range(12)]
    docs += [{"id": "t", "text": "king's crown", "tags": ["royal", "gold"], "n": 1.5}]
    with Index.build(model, docs, tmp_path / "ix", hnsw=HnswSettings(flush_size=16)) as index:
        yield index


def test_query_text_is_never_syntax(filtered: Index) -> None:
    plain = ids(filtered.search("king crown palace", 5, mode="bm25"))
    assert plain == ["t"]
    for query in [
        '"king" AND -crown: (palace)',
        "king OR crown NOT palace",
        "king^2 crown~ [palace] {x}",
        "+king*",
    ]:
        assert ids(filtered.search(query, 5, mode="bm25")) == ["t"], query
    for query in ['"', "AND", "-", ":", "(", "NOT NOT", "\\", "*?"]:
        assert filtered.search(query, 5, mode="bm25") == [], query
    assert ids(filtered.search("kittens", 1, mode="bm25"))[0].startswith("a")  # stemmed: kittens -> kitten
    scores = [h.score for h in filtered.search("bread", 20, mode="bm25")]
    assert len(scores) == 12 and max(scores) - min(scores) < 1e-6  # every word scores (exact BM25)


def test_filters_apply_inside_the_search_so_k_hits_come_back(filtered: Index) -> None:
    for mode in ("bm25", "dense", "hybrid"):
        hits = filtered.search("cat", 10, mode=mode, where={"part": "b"})
        assert len(hits) == 10 and {h.metadata["part"] for h in hits} == {"b"}, mode
    assert len(filtered.search("cat", 20, mode="bm25", where={"part": "b", "flag": True})) == 6
    assert ids(filtered.search("crown", 5, mode="bm25", where={"tags": "gold"})) == ["t"]  # any list element
    assert ids(filtered.search("crown", 5, mode="bm25", where={"n": 1.5})) == ["t"]  # numbers as JSON
    assert ids(filtered.search("cat", 5, mode="bm25", where={"n": "7"})) == ["a7"]
    assert filtered.search("cat", 5, mode="hybrid", where={"part": "c"}) == []


# ---------------------------------------------------------------------- segments, tombstones, merges
def test_merge_policy_is_size_tiered() -> None:
    settings = HnswSettings(flush_size=10, merge_factor=3, merge_max=1000)
    assert plan_merge({"s1": (10, 0), "s2": (12, 0)}, settings) == []
    assert sorted(plan_merge({"s1": (10, 0), "s2": (12, 0), "s3": (9, 0), "big": (500, 0)}, settings)) == [
        "s1",
        "s2",
        "s3",
    ]
    assert plan_merge({"s1": (10, 0), "s2": (120, 0), "s3": (9, 0)}, settings) == []  # other tier
    assert plan_merge({"s1": (90, 40), "s2": (12, 0)}, settings) == ["s1"]  # over a third deleted
    small_max = HnswSettings(flush_size=10, merge_factor=3, merge_max=20)
    assert plan_merge({"s1": (10, 0), "s2": (12, 0), "s3": (9, 0)}, small_max) == []


def test_segments_without_a_live_vector_go_first_and_together() -> None:
    settings = HnswSettings(flush_size=10, merge_factor=3, merge_max=0)  # merge_max 0: no other merge
    assert plan_merge({"s1": (10, 10), "s2": (12, 0), "s3": (5, 5)}, settings) == ["s1", "s3"]
    assert plan_merge({"s1": (10, 9), "s2": (12, 0)}, settings) == []


def test_optimize_merges_everything_unless_it_is_one_clean_segment() -> None:
    assert plan_optimize({}, 0) == [] and plan_optimize({"s1": (10, 0)}, 0) == []
    assert plan_optimize({}, 3) == ["buffer"]  # the buffer alone is flushed too
    assert plan_optimize({"s1": (10, 0)}, 3) == ["s1", "buffer"]
    assert plan_optimize({"s1": (10, 1)}, 0) == ["s1"]
    assert plan_optimize({"s1": (10, 0), "s2": (4, 0)}, 0) == ["s1", "s2"]


def test_writes_across_segments_match_a_fresh_build(model: StaticModel, tmp_path: Path) -> None:
    """Upserts and deletes of documents in segments, the buffer and the same write, merges and optimize:
    every search equals one over an index built from scratch with the same documents."""
    settings = HnswSettings(
        flush_size=4, merge_factor=3, add_threads=2, exact_threshold=10
    )  # graphs and flat
    live = {f"d{i}": text for i, text in enumerate(texts(1, 30))}
    index = Index.build(
        model, [{"id": k, "text": v} for k, v in live.items()], tmp_path / "ix", hnsw=settings
    )
    assert len(index.snapshot.segments) == 2
    untouched = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.glob("ix/seg-*")}

    def check() -> None:
        fresh = Index.build(model, [{"id": k, "text": v} for k, v in live.items()], tmp_path / "fresh")
        assert len(index) == len(fresh) == len(live)
        for query in ["cat king", "soup", "queen crown bread", "puppy"]:
            got = index.search(query, 8, mode="dense", exact=True)
            want = fresh.search(query, 8, mode="dense", exact=True)
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=2e-2), query
            # BM25 counts deleted documents in its statistics until tantivy merges them away (as Lucene
            # does), so scores drift a little: the documents found are the same
            got, want = index.search(query, 100, mode="bm25"), fresh.search(query, 100, mode="bm25")
            assert sorted(ids(got)) == sorted(ids(want)), query
        fresh.close()

    index.add([{"id": "n1", "text": "cat cat"}])  # into the buffer
    live["n1"] = "cat cat"
    assert index.info()["buffered"] == 1
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.glob("ix/seg-*")} == untouched
    index.add([{"id": "d3", "text": "soup soup"}, {"id": "d4", "text": "queen"}], upsert=True)  # in segments
    live.update(d3="soup soup", d4="queen")
    assert sum(s["deleted"] for s in index.info()["segments"]) == 2  # tombstones, files untouched
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.glob("ix/seg-*")} == untouched
    check()
    index.delete(["d5", "n1"])
    del live["d5"], live["n1"]
    check()
    batch = [{"id": "x", "text": "bread"}, {"id": "x", "text": "cheese"}, {"id": "y", "text": "king"}]
    index.add(batch, upsert=True)  # the same id twice in one write: the last one stays
    live.update(x="cheese", y="king")
    for i in range(12):  # small writes: buffer flushes into segments, tiers merge
        index.add([{"id": f"s{i}", "text": texts(100 + i, 1)[0]}])
        live[f"s{i}"] = texts(100 + i, 1)[0]
    info = index.info()
    assert info["buffered"] < settings.flush_size and len(info["segments"]) < 6
    check()
    index.merge(optimize=True)
    info = index.info()
    assert (
        len(info["segments"]) <= 2
        and info["buffered"] == 0
        and not any(s["deleted"] for s in info["segments"])
    )
    assert info["vectors"] == len(live)
    named = {f"{s['name']}.usearch" for s in info["segments"]}
    assert {p.name for p in tmp_path.glob("ix/seg-*")} == named  # merged-away files are gone
    check()
    reopened = Index.open(index.path, model, read_only=True)
    assert reopened.search("cat king", 5) == index.search("cat king", 5)


def test_a_write_returns_with_the_lexical_merges_it_started_finished(
    model: StaticModel, tmp_path: Path
) -> None:
    """tantivy merges segments on background threads after a commit; a write (and a build, before it renames
    its folder) waits for them, so no file of the index changes once it returned."""
    import time

    def files(folder: Path) -> dict[str, int]:
        return {p.name: p.stat().st_mtime_ns for p in sorted((folder / "lexical").iterdir())}

    for trial in range(3):  # a merge outlives an unwaited write in about four runs out of five here
        folder = tmp_path / f"ix{trial}"
        documents = [{"id": f"d{i}", "text": text} for i, text in enumerate(texts(trial, 60))]
        index = Index.build(model, documents, folder, hnsw=HnswSettings(flush_size=4, exact_threshold=10))
        for i in range(12):  # one lexical commit each: enough segments for tantivy's merge policy
            index.add([{"id": f"s{i}", "text": "cat king"}])
        after = files(folder)
        time.sleep(0.5)
        assert files(folder) == after, trial
        index.close()


# ---------------------------------------------------------------------- format, migration, export
def _format1(model: StaticModel, model_dir: Path, folder: Path) -> None:
    """An index folder as format 1 wrote it (config.json and the docs table of docs.sqlite)."""
    folder.mkdir()
    config = {
        "format": "staticsem-index",
        "version": 1,
        "model": {
            "path": str(model_dir),
            "sha256": model_sha256(model),
            "dim": model.dim,
            "words": len(model),
        },
        "vectors": {"dtype": "bfloat16", "connectivity": 16, "expansion_add": 128, "expansion_search": 320},
        "fusion": {
            "method": "convex",
            "dense_weight": 0.25,
            "bm25_weight": 0.75,
            "rrf_k": 60.0,
            "depth": 100,
        },
        "bm25": {"common_df": 1.0},
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    conn = sqlite3.connect(folder / "docs.sqlite")
    conn.execute(
        "CREATE TABLE docs(key INTEGER PRIMARY KEY, id TEXT, text TEXT, metadata TEXT, zero INTEGER)"
    )
    conn.executemany(
        "INSERT INTO docs VALUES (?, ?, ?, ?, 0)",
        [(1, "k", "king queen", '{"topic": "royal"}'), (2, "c", "cat dog", '{"topic": "pets"}')],
    )
    conn.commit()
    conn.close()
    (folder / "vectors-1.usearch").write_bytes(b"old")


def test_an_old_index_is_refused_then_migrated_in_place(model: StaticModel, tmp_path: Path) -> None:
    model_dir = model.save(tmp_path / "model")
    old = tmp_path / "old"
    _format1(model, model_dir, old)
    with pytest.raises(ModelFormatError, match=f"index format 1 .*staticsem index migrate {old}"):
        Index.open(old)
    result = CliRunner().invoke(app, ["search", str(old), "king"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    result = CliRunner().invoke(app, ["index", "migrate", str(old)])
    assert result.exit_code == 0, result.stderr
    with Index.open(old) as index:
        hits = index.search("king", 2, mode="bm25")
        assert ids(hits) == ["k"] and hits[0].metadata == {"topic": "royal"} and len(index) == 2
        assert index.config["version"] == 2 and not (old / "vectors-1.usearch").exists()


def test_a_corrupt_flat_segment_is_a_one_line_error(model: StaticModel, tmp_path: Path) -> None:
    with Index.build(
        model.save(tmp_path / "m"), texts(4, 10), tmp_path / "ix", hnsw=HnswSettings(flush_size=4)
    ):
        pass
    assert [p.name for p in (tmp_path / "ix").glob("seg-*")] == ["seg-1.flat"]
    (tmp_path / "ix" / "seg-1.flat").write_bytes(b"garbage" * 10)
    with pytest.raises(ModelFormatError, match="seg-1.flat: corrupt vector file"):
        Index.open(tmp_path / "ix")


def test_export_to_parquet(model: StaticModel, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    docs = [{"id": f"d{i}", "text": t, "n": i} for i, t in enumerate(texts(3, 9))] + [
        {"id": "z", "text": "zebra"}
    ]
    model_dir = model.save(tmp_path / "model", dtype="float32")
    with Index.build(model_dir, docs, tmp_path / "ix", hnsw=HnswSettings(flush_size=4)) as index:
        index.add([{"id": "late", "text": "cat"}])  # in the buffer
        index.delete(["d2"])
    result = CliRunner().invoke(
        app, ["index", "export", str(tmp_path / "ix"), "--out", str(tmp_path / "x.parquet")]
    )
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(tmp_path / "x.parquet").to_pylist()
    assert [row["id"] for row in table] == [d["id"] for d in docs if d["id"] != "d2"] + ["late"]
    for row in table:
        if row["id"] == "z":
            assert row["vector"] is None  # no known word
            continue
        want = model.encode(row["text"])
        assert np.asarray(row["vector"]) == pytest.approx(want, abs=1e-2)
        assert json.loads(row["metadata"]) == ({} if row["id"] == "late" else {"n": int(row["id"][1:])})


def test_a_search_over_tombstones_asks_the_graphs_for_few_more_than_k(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Deleted (or buried) vectors are over-fetched adaptively: a search over segments holding 160
    tombstones asks each graph for about 2k results, not k + 160, and still returns the k best live."""
    from staticsem.search.vectors import Segment

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(1_200)]
    model = StaticModel(words, rng.normal(size=(len(words), 16)).astype(np.float32))
    index = Index.build(
        model, words, tmp_path / "ix", dtype="float32", hnsw=HnswSettings(exact_threshold=300)
    )
    gone = [str(key) for key in rng.choice(np.arange(1, 1_201), 160, replace=False)]
    index.delete(gone)
    snapshot = index.snapshot
    assert sum(len(d) for d in snapshot.dead.values()) >= 160 and all(
        s.index is not None for s in snapshot.segments
    )
    asked: list[int] = []
    search = Segment.search

    def counting(self: Segment, query: np.ndarray, k: int, exact: bool, expansion=None):  # type: ignore[no-untyped-def]
        asked.append(k)
        return search(self, query, k, exact, expansion)

    monkeypatch.setattr(Segment, "search", counting)
    vectors = model.encode(words)
    live = np.asarray([i for i in range(1, 1_201) if str(i) not in set(gone)])
    for row in vectors[:40]:
        found = [key for key, _ in snapshot.search(row, 10)]
        truth = live[np.argsort(-(vectors[live - 1] @ row), kind="stable")[:10]]
        assert found == truth.tolist()
    assert max(asked) <= 40


# ---------------------------------------------------------------------- one search on several threads
def test_segments_and_hybrid_legs_searched_side_by_side_answer_as_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a pool, graph segments are searched on other threads and hybrid's dense side beside BM25: the
    hits equal those of one thread; hybrid's dense side searches at ``hybrid_expansion``, dense at the
    index's own breadth, each graph on its own thread."""
    import threading

    from staticsem.search.vectors import Segment

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(3_000)]
    model = StaticModel(words, rng.normal(size=(len(words), 16)).astype(np.float32))
    docs = [" ".join(rng.choice(words, 4)) for _ in range(3_000)]
    settings = HnswSettings(exact_threshold=300, add_threads=3, expansion_search=200, hybrid_expansion=24)
    index = Index.build(model, docs, tmp_path / "ix", dtype="float32", hnsw=settings)
    assert sum(s.index is not None for s in index.snapshot.segments) == 3
    calls: list[tuple[int | None, str]] = []
    search = Segment.search

    def recording(self: Segment, query: np.ndarray, k: int, exact: bool, expansion=None):  # type: ignore[no-untyped-def]
        calls.append((expansion, threading.current_thread().name))
        return search(self, query, k, exact, expansion)

    monkeypatch.setattr(Segment, "search", recording)
    queries = docs[:25]
    for mode in ("dense", "hybrid"):
        index.query_threads = 1
        alone = [index.search(q, 10, mode=mode) for q in queries]
        assert {name for _, name in calls} == {threading.current_thread().name}
        assert {e for e, _ in calls} == {None if mode == "dense" else 24}
        calls.clear()
        index.query_threads = 2
        beside = [index.search(q, 10, mode=mode) for q in queries]
        assert [[(h.id, h.score) for h in hits] for hits in beside] == [
            [(h.id, h.score) for h in hits] for hits in alone
        ]
        assert {e for e, _ in calls} == {None if mode == "dense" else 24}
        assert any(name.startswith("staticsem-segments") for _, name in calls)
        calls.clear()
    index.close()
