"""staticsem.search: the index's inputs, ranking modes, updates, safety and CLI (small data made here)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import staticsem
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import InputError, ModelFormatError
from staticsem.search import Document, FusionSettings, HnswSettings, Index, read_documents
from staticsem.search.fusion import fuse

TOPICS = {
    "animals": ["cat", "kitten", "dog", "puppy", "pet"],
    "royalty": ["king", "queen", "crown", "throne", "palace"],
    "food": ["bread", "cheese", "soup", "apple", "dinner"],
}
FILLER = ["the", "a", "of", "and", "on"]


@pytest.fixture(scope="module")
def model() -> StaticModel:
    """Words of one topic share a direction (plus noise), so dense search finds synonyms."""
    rng = np.random.default_rng(3)
    words, rows = [], []
    centres = {topic: rng.normal(size=32) for topic in TOPICS}
    for topic, members in TOPICS.items():
        for word in members:
            words.append(word)
            rows.append(centres[topic] + 0.6 * rng.normal(size=32))
    for word in FILLER:
        words.append(word)
        rows.append(0.05 * rng.normal(size=32))
    return StaticModel(words, np.asarray(rows, dtype=np.float32), metadata={"method": "test"})


@pytest.fixture(scope="module")
def model_dir(model: StaticModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model.save(tmp_path_factory.mktemp("m") / "model")


DOCS = [
    {"id": "a1", "text": "the cat and the dog", "topic": "animals"},
    {"id": "a2", "text": "a kitten on a puppy", "topic": "animals"},
    {"id": "r1", "text": "the king of the palace", "topic": "royalty"},
    {"id": "r2", "text": "a queen and a crown", "topic": "royalty"},
    {"id": "f1", "text": "bread and cheese", "topic": "food"},
    {"id": "f2", "text": "soup of apple for dinner", "topic": "food"},
    {"id": "z", "text": "", "topic": "none"},
    {"id": "u", "text": "zebra xylophone", "topic": "none"},
]


def ids(hits: list) -> list[str]:
    return [hit.id for hit in hits]


def same_ranking(got: list, want: list, tolerance: float = 1e-5) -> bool:
    """Equal scores, and equal ids but for the order of (near-)ties and which ties the cut at k keeps."""
    if [h.score for h in got] != pytest.approx([h.score for h in want], abs=tolerance):
        return False
    last = want[-1].score + tolerance if want else 0.0
    return {h.id for h in got if h.score > last} == {h.id for h in want if h.score > last}


@pytest.fixture()
def index(model_dir: Path, tmp_path: Path) -> Index:
    built = Index.build(model_dir, DOCS, tmp_path / "ix")
    yield built
    built.close()


# ---------------------------------------------------------------------- ranking
def test_dense_finds_synonyms_bm25_finds_words_hybrid_fuses(index: Index) -> None:
    dense = index.search("kitten", 3, mode="dense")
    assert set(ids(dense)[:2]) == {"a1", "a2"}  # "the cat and the dog" shares no word with the query
    assert dense[0].score == pytest.approx(
        float(index.model.encode("kitten") @ index.model.encode(dense[0].text)), abs=1e-3
    )  # vectors stored as bfloat16
    assert ids(index.search("kitten", 3, mode="bm25")) == ["a2"]  # the only document holding the word
    hybrid = index.search("kitten", 2, mode="hybrid")  # default: 0.25 x min-max dense + 0.75 x BM25
    assert ids(hybrid) == ["a2", "a1"] and index.fusion == FusionSettings("convex", 0.25, 0.75)
    assert hybrid[0].score == pytest.approx(1.0 if ids(dense)[0] == "a2" else 0.75)
    every = [h.score for h in index.search("kitten", 100, mode="dense")]  # the dense candidate list
    assert hybrid[1].score == pytest.approx(0.25 * (every[1] - every[-1]) / (every[0] - every[-1]))
    rrf = index.search("kitten", 2, mode="hybrid", fusion=FusionSettings("rrf", 1.0, 1.0))
    assert rrf[0].score == pytest.approx(1 / 61 + 1 / 61 if ids(dense)[0] == "a2" else 1 / 62 + 1 / 61)


def test_fusion_rules_by_hand() -> None:
    dense, lexical = [(1, 0.9), (2, 0.5), (3, 0.1)], [(3, 12.0), (4, 2.0)]
    rrf = dict(fuse([dense, lexical], [1.0, 2.0], FusionSettings(method="rrf", rrf_k=10)))
    assert rrf[3] == pytest.approx(1 / 13 + 2 / 11) and rrf[4] == pytest.approx(2 / 12)
    assert rrf[1] == pytest.approx(1 / 11)
    convex = fuse([dense, lexical], [0.25, 0.75], FusionSettings(method="convex"))
    assert convex[0] == (3, pytest.approx(0.75)) and dict(convex)[1] == pytest.approx(0.25)
    assert dict(convex)[4] == pytest.approx(0.0)
    with pytest.raises(InputError, match="fusion"):
        FusionSettings(method="max")


def test_where_filters_every_mode(index: Index) -> None:
    for mode in ("dense", "bm25", "hybrid"):
        hits = index.search("the king and the cat", 5, mode=mode, where={"topic": "animals"})
        assert hits and {hit.metadata["topic"] for hit in hits} == {"animals"}, mode
    assert index.search("king", 5, where={"topic": "nothing"}) == []
    with pytest.raises(InputError, match="field name"):
        index.search("king", where={"bad'name": "x"})


def test_hnsw_matches_exact_search_reaches_every_document_and_filters_through_it(
    model: StaticModel, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    vocab = [w for words in TOPICS.values() for w in words]
    docs = [{"text": " ".join(rng.choice(vocab, 4)), "id": f"d{i}", "part": str(i % 7)} for i in range(600)]
    # float32: bfloat16 rounding turns near-ties into ties that the two searches may order differently
    exact = Index.build(model, docs, tmp_path / "exact", dtype="float32")
    settings = HnswSettings(exact_threshold=0, flush_size=50, add_threads=2)
    graph = Index.build(model, docs, tmp_path / "hnsw", dtype="float32", hnsw=settings)
    assert graph.info()["dense_search"] == "hnsw" and exact.info()["dense_search"] == "exact"
    assert [s["vectors"] for s in graph.info()["segments"]] == [300, 300]  # two graphs, built side by side
    for query in [" ".join(rng.choice(vocab, 2)) for _ in range(30)]:
        want = exact.search(query, 10, mode="dense")
        assert [h.score for h in graph.search(query, 10, mode="dense")] == pytest.approx(
            [h.score for h in want], abs=1e-5
        )
        assert same_ranking(graph.search(query, 10, mode="dense", exact=True), want)
        filtered = graph.search(query, 5, mode="dense", where={"part": "3"})
        assert same_ranking(filtered, exact.search(query, 5, mode="dense", where={"part": "3"}))
        assert {h.metadata["part"] for h in filtered} == {"3"}
    # every document finds itself in its segment's graph (usearch's concurrent add would strand some)
    for segment in graph.snapshot.segments:
        found = segment.index.search(segment.vectors(segment.keys), 1, threads=1)
        assert ((found.keys[:, 0] == segment.keys) | (found.distances[:, 0] < 1e-6)).all()


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [("bfloat16", 1e-2), ("float16", 2e-3), ("float32", 1e-6), ("int8", 3e-2)]
)
def test_each_vector_dtype_is_kept_and_scores_close(
    model: StaticModel, tmp_path: Path, dtype: str, tolerance: float
) -> None:
    Index.build(model, DOCS, tmp_path / dtype, dtype=dtype).close()
    with Index.open(tmp_path / dtype, model, read_only=True) as index:
        assert index.info()["dtype"] == dtype
        for hit in index.search("kitten crown", 6, mode="dense"):
            expected = float(model.encode("kitten crown") @ model.encode(hit.text))
            assert hit.score == pytest.approx(expected, abs=tolerance)


# ---------------------------------------------------------------------- inputs
def test_every_input_format(model_dir: Path, tmp_path: Path) -> None:
    rows = [("x1", "the cat", "animals"), ("x2", "a queen", "royalty")]
    (tmp_path / "d.txt").write_text("the cat\na queen\n", encoding="utf-8")
    with gzip.open(tmp_path / "d.jsonl.gz", "wt", encoding="utf-8") as handle:
        for doc_id, text, topic in rows:
            handle.write(json.dumps({"id": doc_id, "text": text, "topic": topic}) + "\n")
    for name, sep in (("d.csv", ","), ("d.tsv", "\t")):
        body = [sep.join(["key", "body", "topic"])] + [sep.join(r) for r in rows]
        (tmp_path / name).write_text("\n".join(body) + "\n", encoding="utf-8")
    txt = list(read_documents(str(tmp_path / "d.txt")))
    assert [(d.text, d.id, d.where) for d in txt] == [
        ("the cat", None, f"{tmp_path}/d.txt:1"),
        ("a queen", None, f"{tmp_path}/d.txt:2"),
    ]
    jsonl = list(read_documents(str(tmp_path / "d.jsonl.gz")))
    assert [(d.id, d.text, d.metadata) for d in jsonl] == [(i, t, {"topic": c}) for i, t, c in rows]
    for name in ("d.csv", "d.tsv"):
        docs = list(read_documents(str(tmp_path / name), text_column="body", id_column="key"))
        assert [(d.id, d.text, d.metadata) for d in docs] == [(i, t, {"topic": c}) for i, t, c in rows]
    index = Index.build(
        model_dir,
        read_documents(str(tmp_path / "d.tsv"), text_column="body", id_column="key"),
        tmp_path / "ix",
    )
    assert ids(index.search("queen", 1, where={"topic": "royalty"})) == ["x2"]


@pytest.mark.parametrize(
    ("name", "content", "options", "message"),
    [
        ("bad.txt", b"fine\nbad \xff byte\n", {}, "bad.txt:2: not valid UTF-8"),
        ("bad.jsonl", b'{"text": "ok"}\n{"text": \n', {}, "bad.jsonl:2: not valid JSON"),
        ("nofield.jsonl", b'{"text": "ok"}\n{"body": "x"}\n', {}, "nofield.jsonl:2: no 'text' field"),
        ("cols.csv", b"a,b\n1,2\n", {"text_column": "text"}, "cols.csv:1: no column 'text'"),
        ("short.tsv", b"text\tid\nhello\n", {"id_column": "id"}, "short.tsv:2: 1 fields"),
        ("x.parquet", b"", {}, "cannot tell the format"),
    ],
)
def test_bad_input_names_file_and_line(
    tmp_path: Path, name: str, content: bytes, options: dict, message: str
):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        list(read_documents(str(tmp_path / name), **options))


# ---------------------------------------------------------------------- updates and persistence
def test_add_delete_upsert_and_reload(index: Index, model: StaticModel) -> None:
    assert index.add([{"id": "r3", "text": "the throne", "topic": "royalty"}, "a puppy"]) == 2
    assert len(index) == len(DOCS) + 2
    assigned = index.search("puppy", 1, mode="bm25", where={})
    assert assigned[0].text == "a puppy" and assigned[0].id.isdigit()
    with pytest.raises(InputError, match="duplicate document id 'r3'"):
        index.add([{"id": "new", "text": "cat"}, {"id": "r3", "text": "soup"}])
    assert len(index) == len(DOCS) + 2 and not index.search("new", mode="bm25")  # all or nothing
    with pytest.raises(InputError, match="duplicate document id 'w'"):
        index.add([{"id": "w", "text": "cat"}, {"id": "w", "text": "soup"}])
    index.add([{"id": "r3", "text": "bread soup"}], upsert=True)
    assert index.search("throne", 3, mode="bm25") == []
    assert index.search("bread soup", 1, mode="dense")[0].id in {"r3", "f1", "f2"}
    assert index.delete(["r3", "a1"]) == 2
    for mode in ("dense", "bm25", "hybrid"):
        assert not {"r3", "a1"} & set(ids(index.search("cat dog bread soup", 10, mode=mode)))
    with pytest.raises(InputError, match="no document with id 'nope'"):
        index.delete(["a2", "nope"])
    assert "a2" in ids(index.search("kitten", 3))  # the failed delete removed nothing
    reopened = Index.open(index.path, read_only=True)
    assert len(reopened) == len(index) and reopened.search("kitten", 3) == index.search("kitten", 3)
    with pytest.raises(InputError, match="read-only"):
        reopened.add(["cat"])
    info = index.info()
    assert info["documents"] == len(index) and info["zero_vectors"] == 2 and info["vectors"] == len(index) - 2
    assert info["buffered"] == len(index) - 2 and info["segments"] == []  # small writes wait in the buffer


def test_empty_and_unknown_documents_are_zero_vectors_found_by_bm25(index: Index) -> None:
    assert index.info()["zero_vectors"] == 2
    assert "u" not in ids(index.search("zebra", 10, mode="dense"))
    assert ids(index.search("zebra", 10, mode="bm25")) == ["u"]
    assert ids(index.search("zebra", 10, mode="hybrid")) == ["u"]


def test_model_mismatch_is_refused(index: Index, model: StaticModel, model_dir: Path) -> None:
    other = StaticModel(model.vocab, model.vectors[::-1].copy())
    for wrong in (other, model):  # other weights; the same model at another precision (float32, not 16)
        with pytest.raises(InputError, match="built with another model"):
            Index.open(index.path, wrong)
    assert Index.open(index.path, staticsem.load(model_dir)).search("cat", 1)  # the same weights in memory


def test_interrupted_build_keeps_the_previous_index(model_dir: Path, index: Index) -> None:
    before = index.search("kitten", 5)

    def docs_then_interrupt():
        yield from ["the cat", "a dog"]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Index.build(model_dir, docs_then_interrupt(), index.path)
    assert Index.open(index.path).search("kitten", 5) == before
    assert [p.name for p in index.path.parent.iterdir() if p.name.endswith(".tmp")] == []
    with pytest.raises(KeyboardInterrupt):
        Index.build(model_dir, docs_then_interrupt(), index.path.parent / "fresh")
    assert not (index.path.parent / "fresh").exists()


def test_interrupted_add_changes_nothing(index: Index) -> None:
    before, count = index.search("kitten", 5), len(index)

    def docs_then_fail():
        yield from ({"id": f"n{i}", "text": "cat king"} for i in range(10))
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        index.add(docs_then_fail(), batch_size=3)
    assert len(index) == count and index.search("kitten", 5) == before
    assert index.info()["vectors"] == count - 2  # the vectors of the failed batches are gone too
    assert Index.open(index.path).search("kitten", 5) == before
    index.add([{"id": "n0", "text": "cat king"}])
    assert ids(index.search("n0 cat king", 1, mode="bm25")) == ["n0"] and index.info()["vectors"] == count - 1


KILL_SCRIPT = """
import os, signal, sys, threading, time
from staticsem.search import Index
from staticsem.search.lexical import LexicalWriter
from staticsem.search.store import DocStore

def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

index = Index.open(sys.argv[1])
when = sys.argv[2]
real_commit = LexicalWriter.commit
if when == "in-segment-write":  # the segment file is written, not yet flushed and renamed
    os.fsync = kill
elif when == "before-store-commit":  # the segment file is in place, the store has not committed
    DocStore.finish_commit = kill
elif when == "before-lexical-commit":  # the store has committed, the lexical engine not
    LexicalWriter.commit = kill
elif when == "in-lexical-commit":  # killed while tantivy commits
    def commit(self):
        threading.Timer(0.002, kill).start()
        real_commit(self)
        time.sleep(10)
    LexicalWriter.commit = commit
elif when == "before-lexical-record":  # tantivy has committed, the store does not know yet
    DocStore.lexical_done = kill
if when == "while-streaming":
    def docs():
        yield {"id": "k1", "text": "cat king"}
        kill()
    index.add(docs(), batch_size=1)
index.add([{"id": "k1", "text": "cat king", "topic": "new"}])
"""
BEFORE_COMMIT = ["in-segment-write", "before-store-commit", "while-streaming"]
AFTER_COMMIT = ["before-lexical-commit", "in-lexical-commit", "before-lexical-record"]


@pytest.fixture()
def segmented(model_dir: Path, tmp_path: Path) -> Index:
    """The test documents in graph segments; every write makes a new one (flush_size 1, no flat segments)."""
    settings = HnswSettings(flush_size=1, merge_factor=100, exact_threshold=0)
    with Index.build(model_dir, DOCS, tmp_path / "ix", hnsw=settings) as built:
        yield built


@pytest.mark.parametrize("when", BEFORE_COMMIT + AFTER_COMMIT)
def test_sigkill_at_every_step_of_a_write_leaves_the_last_committed_state(
    segmented: Index, when: str
) -> None:
    index = segmented
    before, count, files = index.search("kitten", 5), len(index), sorted(index.path.glob("seg-*"))
    assert len(files) == 2  # one segment per core (add_threads 0 on two cores; one on one core)
    index.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILL_SCRIPT), str(index.path), when], env=env
    )
    assert done.returncode == -signal.SIGKILL
    reopened = Index.open(index.path)  # a writable open lets the lexical engine catch up
    if when in BEFORE_COMMIT:
        assert len(reopened) == count and not reopened.search("k1", mode="bm25")
        assert reopened.search("kitten", 5) == before
    else:
        assert len(reopened) == count + 1
        for mode in ("bm25", "dense", "hybrid"):  # found, and once only
            assert ids(reopened.search("cat king", 20, mode=mode)).count("k1") == 1, mode
        assert ids(reopened.search("king", 5, mode="bm25", where={"topic": "new"})) == ["k1"]
    reopened.add([{"id": "k2", "text": "cat king"}])  # and it still takes changes
    assert "k2" in ids(reopened.search("k2 cat king", 5, mode="bm25"))
    named = {f"{s['name']}.usearch" for s in reopened.info()["segments"]}
    assert {p.name for p in index.path.glob("*seg-*")} == named  # a dead write's file is gone


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("config.json", b"{not json", "config.json"),
        ("docs.sqlite", b"garbage" * 100, "docs.sqlite: not a staticsem index database"),
        ("seg-1.usearch", b"garbage" * 100, "seg-1.usearch: corrupt vector file"),
        ("lexical/meta.json", b"{not json", "lexical: not a lexical index"),
        ("lexical", None, "lexical: the lexical index is missing"),
    ],
)
def test_corrupt_index_files_are_one_line_errors(segmented: Index, name: str, content: bytes, message: str):
    segmented.close()
    if content is None:
        shutil.rmtree(segmented.path / name)
    else:
        (segmented.path / name).write_bytes(content)
    for suffix in ("-wal", "-shm"):
        (segmented.path / f"docs.sqlite{suffix}").unlink(missing_ok=True)
    with pytest.raises(ModelFormatError, match=message):
        Index.open(segmented.path)


def test_document_coercion() -> None:
    assert Document.coerce({"text": "t", "id": 7, "lang": "en"}) == Document("t", "7", {"lang": "en"})
    with pytest.raises(InputError, match="'text'"):
        Document.coerce({"id": "x"})


# ---------------------------------------------------------------------- command line
runner = CliRunner()


def cli(*args: object, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=input)
    return result.exit_code, result.stdout, result.stderr


def test_cli_build_search_add_delete_info(model_dir: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    out = tmp_path / "ix"
    code, _, err = cli("index", "build", model_dir, docs, "--out", out, "--build-threads", "0")
    assert code == 0, err
    assert Index.open(out, read_only=True).info()["hnsw"]["add_threads"] == 0
    code, stdout, err = cli("search", out, "kitten", "-k", "2", "--json")
    assert code == 0, err
    assert [h["id"] for h in json.loads(stdout)] == ["a2", "a1"]
    code, stdout, _ = cli("search", out, "king", "--mode", "bm25", "--where", "topic=royalty", "--json")
    assert [h["id"] for h in json.loads(stdout)] == ["r1"]
    code, _, err = cli("index", "add", out, "-", "--format", "txt", input="a crown\nthe throne\n")
    assert code == 0, err
    code, _, err = cli("index", "delete", out, "--id", "r1", "--id", "r2")
    assert code == 0, err
    code, stdout, _ = cli("search", out, "crown throne", "--mode", "bm25", "--json")
    assert sorted(h["text"] for h in json.loads(stdout)) == ["a crown", "the throne"]
    code, stdout, _ = cli("index", "info", out)
    assert code == 0 and "zero vectors" in stdout and '"documents"' not in stdout
    assert Index.open(out).info()["documents"] == len(DOCS) - 2 + 2


def test_cli_errors_are_one_line(model_dir: Path, tmp_path: Path, model: StaticModel) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    code, _, err = cli("index", "build", model_dir, bad, "--out", tmp_path / "ix")
    assert code == 2 and err.strip().splitlines() == [
        f"error: {bad}:2: not valid UTF-8 (byte 0xff at column 1); "
        "pass --errors replace to substitute such bytes"
    ]
    assert not (tmp_path / "ix").exists()
    code, _, err = cli("index", "build", model_dir, bad, "--out", tmp_path / "ix", "--build-threads", "-1")
    assert code == 2 and "build threads" in err and len(err.strip().splitlines()) == 1
    good = tmp_path / "good.txt"
    good.write_text("the cat\n", encoding="utf-8")
    assert cli("index", "build", model_dir, good, "--out", tmp_path / "ix")[0] == 0
    other = StaticModel(model.vocab, -model.vectors).save(tmp_path / "other")
    code, _, err = cli("search", tmp_path / "ix", "cat", "--model", other)
    assert code == 2 and "built with another model" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("search", tmp_path / "ix", "cat", "--where", "novalue")
    assert code == 2 and "FIELD=VALUE" in err
    code, _, err = cli("search", tmp_path / "ix", "cat", "--mode", "fuzzy")
    assert code == 2 and "search mode" in err
    code, _, err = cli("search", tmp_path / "missing", "cat")
    assert code == 2 and "no index folder" in err


def test_top_level_lazy_name() -> None:
    assert staticsem.Index is Index


def test_bm25_leaves_out_common_words_only_when_asked(model: StaticModel, tmp_path: Path) -> None:
    docs = [
        {"id": "c", "text": "the cat"},
        {"id": "k", "text": "the king"},
        {"id": "t", "text": "the the the"},
    ]
    docs += [{"id": f"f{i}", "text": "the bread"} for i in range(5)]
    exact = Index.build(model, docs, tmp_path / "exact")
    assert exact.info()["bm25"] == {"common_df": 1.0, "engine": "tantivy"}
    assert "t" in ids(exact.search("the cat", 10, mode="bm25"))  # every word scores, "the" too
    pruned = Index.build(model, docs, tmp_path / "pruned", bm25_common_df=0.5)
    assert ids(pruned.search("the cat", 10, mode="bm25")) == ["c"]  # "the" (in 8 of 8) is left out
    only_common = pruned.search("the", 10, mode="bm25")  # nothing else left: the word is kept
    assert ids(only_common)[0] == "t" and len(only_common) == len(docs)
    assert pruned.store.documents() == len(docs)
    pruned.delete(["t"])
    assert pruned.store.documents() == len(docs) - 1
    with pytest.raises(InputError, match="bm25_common_df"):
        Index.build(model, docs, tmp_path / "bad", bm25_common_df=0)


def test_bm25_matches_words_not_stems(model: StaticModel, tmp_path: Path) -> None:
    index = Index.build(model, ["he played the guitar", "guitars", "generalization"], tmp_path / "ix")
    assert len(index.search("playing", 5, mode="bm25")) == 1  # Porter: playing, played -> plai
    assert len(index.search("guitar", 5, mode="bm25")) == 2
    assert len(index.search("generalizations", 5, mode="bm25")) == 1
    assert index.search('" OR cat* NEAR(', 5, mode="bm25") == []  # FTS5 syntax is never interpreted


def test_a_write_never_builds_on_vectors_another_writer_replaced(index: Index) -> None:
    """Writer B refreshes its vectors, then writer A commits: B must not save vectors without A's."""
    import threading

    other = Index.open(index.path)
    refresh = other._refresh
    writers: list[threading.Thread] = []

    def refresh_then_let_a_write():  # type: ignore[no-untyped-def]
        snapshot = refresh()
        if writers:
            return snapshot
        writer = threading.Thread(target=index.add, args=([{"id": "from-a", "text": "cat"}],))
        writer.start()
        writer.join(timeout=1.0)  # A either waits for B's transaction or commits now
        writers.append(writer)
        return snapshot

    other._refresh = refresh_then_let_a_write  # type: ignore[method-assign]
    other.add([{"id": "from-b", "text": "king"}])
    writers[0].join()
    fresh = Index.open(index.path)
    assert fresh.info()["vectors"] == len(fresh) - 2  # every non-empty document has its vector
    assert {"from-a", "from-b"} <= set(ids(fresh.search("cat king", 20, mode="dense")))


def test_an_index_of_a_phrase_model_encodes_queries_and_documents_with_its_phrases(
    phrase_model: StaticModel, tmp_path: Path
) -> None:
    from conftest import PHRASE_TEXTS

    docs = [{"id": str(i), "text": text} for i, text in enumerate(PHRASE_TEXTS)]
    built = Index.build(phrase_model.save(tmp_path / "m"), docs, tmp_path / "ix")
    try:
        query = "the king"
        hits = built.search(query, k=len(docs), mode="dense", exact=True)
        vectors = phrase_model.encode_document(PHRASE_TEXTS)
        want = vectors @ phrase_model.encode_query(query)
        got = {hit.id: hit.score for hit in hits}
        assert got == pytest.approx(
            {str(i): float(s) for i, s in enumerate(want) if PHRASE_TEXTS[i] != "zzz"}, abs=1e-3
        )
        plain = phrase_model.without_phrases()
        assert not np.allclose(
            want, plain.encode_document(PHRASE_TEXTS) @ plain.encode_query(query), atol=0.01
        )
    finally:
        built.close()
