"""staticsem.search after writes: upserts and deletes of documents still in the buffer, graphs mostly
deleted, every document deleted, writes the model-based test (test_search_state.py) found wrong, and the
Parquet export across segments and the buffer (small data made here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from staticsem import StaticModel
from staticsem.cli import app
from staticsem.search import HnswSettings, Index

WORDS = ["cat", "kitten", "dog", "puppy", "king", "queen", "crown", "bread", "cheese", "soup", "palace"]


@pytest.fixture(scope="module")
def model() -> StaticModel:
    rng = np.random.default_rng(7)
    return StaticModel(WORDS, rng.normal(size=(len(WORDS), 16)).astype(np.float32))


def one_word_model(count: int, dim: int = 16) -> StaticModel:
    """``count`` words ``w0``... with random rows: one-word documents have distinct vectors."""
    rng = np.random.default_rng(count)
    return StaticModel([f"w{i}" for i in range(count)], rng.normal(size=(count, dim)).astype(np.float32))


def test_an_upsert_or_delete_of_documents_still_in_the_buffer_replaces_their_vectors(
    model: StaticModel, tmp_path: Path
) -> None:
    """Keys are never reused: a document upserted (or deleted, then another added) while it is still in the
    buffer is searched by its new vector, not the one a reader cached for its key."""
    old = ["cat kitten", "dog puppy", "king queen", "bread cheese"]
    docs = [{"id": f"d{i}", "text": text} for i, text in enumerate(old)]
    index = Index.build(model, docs, tmp_path / "ix", dtype="float32", hnsw=HnswSettings(flush_size=64))
    assert index.info()["buffered"] == 4 and index.search("cat", 1, mode="dense")  # vectors cached

    def first(text: str, doc_id: str) -> None:
        hit = index.search(text, 1, mode="dense", exact=True)[0]
        assert (hit.id, hit.text) == (doc_id, text) and hit.score == pytest.approx(1.0, abs=1e-5)

    index.add([{"id": "d3", "text": "soup palace"}], upsert=True)  # the newest document
    first("soup palace", "d3")
    index.delete(["d3"])  # the newest again
    index.add([{"id": "new", "text": "crown crown"}])
    first("crown crown", "new")
    for text in ["bread cheese", "soup palace"]:  # replaced, then deleted: no vector of theirs is left
        assert index.search(text, 1, mode="dense", exact=True)[0].score < 0.999
    assert index.info()["buffered"] == len(index) == 4


def test_dense_search_finds_k_live_hits_in_a_graph_mostly_deleted(tmp_path: Path) -> None:
    """80 % of a graph segment deleted, merges off: every dense search still returns k live documents,
    those of exact search over the live documents."""
    model = one_word_model(1_000)
    settings = HnswSettings(exact_threshold=100, merge_max=0, add_threads=1)
    index = Index.build(model, model.vocab, tmp_path / "ix", dtype="float32", hnsw=settings)
    rng = np.random.default_rng(1)
    gone = rng.choice(np.arange(1, 1_001), 800, replace=False)
    index.delete([str(key) for key in gone])
    [segment] = index.info()["segments"]
    assert index.snapshot.segments[0].index is not None and segment["deleted"] >= 800  # a graph, unmerged
    live = np.setdiff1d(np.arange(1, 1_001), gone)
    vectors = model.encode(model.vocab)
    for word in rng.choice(model.vocab, 30, replace=False):
        hits = index.search(word, 10, mode="dense")
        truth = live[np.argsort(-(vectors[live - 1] @ model.encode(word)), kind="stable")[:10]]
        assert [int(hit.id) for hit in hits] == truth.tolist(), word


def test_an_id_upserted_in_two_batches_of_one_write_counts_once(model: StaticModel, tmp_path: Path) -> None:
    index = Index.build(model, [{"id": "a", "text": "cat"}], tmp_path / "ix")
    docs = [{"id": "a", "text": "dog"}, {"id": "a", "text": "king"}, {"id": "b", "text": "soup"}]
    assert index.add(docs, upsert=True, batch_size=1) == 2
    assert len(index) == 2 and index.search("king", 1, mode="bm25")[0].id == "a"


def test_a_batch_without_a_known_word_in_a_write_large_enough_for_graphs(
    model: StaticModel, tmp_path: Path
) -> None:
    """The write's vectors already go to a graph builder when a batch of only unknown words arrives."""
    docs = ["cat dog", "king", "soup", "bread", "zebra", "", "queen"]
    index = Index.build(model, docs, tmp_path / "ix", hnsw=HnswSettings(exact_threshold=3), batch_size=1)
    assert len(index) == 7 and index.info()["vectors"] == 5
    assert index.search("zebra", 1, mode="bm25")[0].text == "zebra"


def test_a_reader_whose_layout_another_process_merged_away_reads_the_next(
    model: StaticModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader (another process: ``staticsem serve --workers``) reads a layout, and before it opens the
    segment files a later commit's merge removes them: it reads the newer layout (was: a 500)."""
    writer = Index.build(model, [], tmp_path / "ix", hnsw=HnswSettings(flush_size=1, merge_factor=2))
    reader = Index.open(tmp_path / "ix", model, read_only=True)
    writer.add([{"id": "a", "text": "cat"}])  # seg-1
    read, raced = Index._read_snapshot, []

    def racing(self: Index, state: dict, current: object) -> object:
        if self is reader and not raced:  # inside the reader's transaction, which names seg-1
            raced.append(writer.add([{"id": "b", "text": "dog"}]))  # seg-2, merged with seg-1 into seg-3
            assert not (tmp_path / "ix" / "seg-1.flat").exists()
        return read(self, state, current)  # type: ignore[arg-type]

    monkeypatch.setattr(Index, "_read_snapshot", racing)
    assert sorted(hit.id for hit in reader.search("cat dog", 5, mode="dense")) == ["a", "b"] and raced
    assert [s.name for s in reader.snapshot.segments] == ["seg-3"]


def _every_document_deleted(path: Path) -> None:
    """A 3,000-document index with default settings (one flat segment), then every document deleted by the
    command line: the segment has no live vector left."""
    runner = CliRunner()
    ids = [f"--id={i}" for i in range(1, 3_001)]
    result = runner.invoke(app, ["index", "delete", str(path), *ids])
    assert result.exit_code == 0, result.output
    assert "deleted 3,000 documents; 0 left" in result.stderr


def test_deleting_every_document_drops_the_segment_and_later_writes_work(tmp_path: Path) -> None:
    model = one_word_model(3_000)
    folder = model.save(tmp_path / "m")
    Index.build(folder, model.vocab, tmp_path / "ix").close()
    assert [p.name for p in (tmp_path / "ix").glob("seg-*")] == ["seg-1.flat"]
    _every_document_deleted(tmp_path / "ix")
    assert not list((tmp_path / "ix").glob("seg-*"))  # dropped, nothing rebuilt
    (tmp_path / "more.txt").write_text("w7 w8\nw9\n", encoding="utf-8")
    runner = CliRunner()
    for _ in range(2):  # every later write works
        result = runner.invoke(app, ["index", "add", str(tmp_path / "ix"), str(tmp_path / "more.txt")])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["search", str(tmp_path / "ix"), "w9", "--mode", "dense", "--json"])
    assert result.exit_code == 0 and [h["text"] for h in json.loads(result.stdout)][:2] == ["w9", "w9"]
    with Index.open(tmp_path / "ix") as index:
        info = index.info()
        assert len(index) == info["vectors"] == 4 and info["buffered"] == 4 and info["segments"] == []
        index.merge(optimize=True)
        assert [s["vectors"] for s in index.info()["segments"]] == [4]


def test_a_merge_that_replaces_nothing_stops_with_an_error(
    model: StaticModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A merge that leaves its segment in place (a bug) raises instead of planning the same merge for ever;
    after a write it is logged and the write stands."""
    from staticsem.search import writes

    index = Index.build(model, WORDS, tmp_path / "ix", hnsw=HnswSettings(flush_size=4))
    (segment,) = index.snapshot.segments
    monkeypatch.setattr(writes, "merge_segments", lambda *args: None)
    index.delete([str(key) for key in segment.keys])  # the segment has no live vector: planned for a merge
    assert "the merge after a write failed" in caplog.text and len(index) == len(WORDS) - len(segment)
    with pytest.raises(RuntimeError, match=f"merging left {segment.name} in place"):
        index.merge()
    index.close()


def test_export_rows_line_up_across_graphs_flat_segments_and_the_buffer(
    model: StaticModel, tmp_path: Path
) -> None:
    """Exported in batches of 1, 3 and all rows: every row's id, text, metadata and vector belong together,
    whichever segment (or the buffer) holds its vector."""
    pq = pytest.importorskip("pyarrow.parquet")
    from staticsem.search.export import export_parquet

    rng = np.random.default_rng(5)
    settings = HnswSettings(flush_size=5, exact_threshold=10, add_threads=2, merge_max=0)
    docs = [{"id": f"g{i}", "text": " ".join(rng.choice(WORDS, 3)), "n": i} for i in range(30)]
    index = Index.build(model, docs, tmp_path / "ix", dtype="float32", hnsw=settings)
    flat = [{"id": f"f{i}", "text": " ".join(rng.choice(WORDS, 2)), "n": 100 + i} for i in range(6)]
    late = [{"id": "b0", "text": "soup"}, {"id": "b1", "text": "queen cat"}, {"id": "z", "text": "zebra"}]
    index.add(flat)
    index.add([*late, {"id": "b2", "text": "dog"}])
    index.delete(["g3", "f2", "b0"])
    kinds = {s.index is not None for s in index.snapshot.segments}
    assert kinds == {True, False} and index.info()["buffered"] == 2
    written = [
        d for d in [*docs, *flat, *late, {"id": "b2", "text": "dog"}] if d["id"] not in {"g3", "f2", "b0"}
    ]
    for batch in (1, 3, 100):
        assert export_parquet(index, tmp_path / "x.parquet", batch=batch) == len(index) == len(written)
        rows = pq.read_table(tmp_path / "x.parquet").to_pylist()
        assert [row["id"] for row in rows] == [d["id"] for d in written]
        for row, doc in zip(rows, written, strict=True):
            metadata = {k: v for k, v in doc.items() if k not in ("id", "text")}
            assert row["text"] == doc["text"] and json.loads(row["metadata"]) == metadata
            if doc["id"] == "z":
                assert row["vector"] is None  # no known word
            else:
                want = model.encode(doc["text"])
                np.testing.assert_allclose(
                    row["vector"], want, atol=1e-6, err_msg=f"{doc['id']} batch {batch}"
                )
