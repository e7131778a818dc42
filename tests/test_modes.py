"""Encoding by purpose: query and document modes in the model, its files, the CLI, the index and the server
(the framework adapters: tests/test_integrations.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import staticsem
from conftest import MODE_TEXTS
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import InputError, ModelFormatError
from staticsem.modes import ModeSettings, RowSet
from staticsem.pieces import PieceTable
from staticsem.serve import create_app

QUERY = "unhappiness of houses"
EXPORTS = ["word2vec", "word2vec-binary", "glove", "fasttext", "model2vec", "sentence-transformers"]


def run(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def at_weight(model: StaticModel, weight: float) -> StaticModel:
    """``model`` without modes, its pieces at ``weight``: what a mode of that piece weight must encode as."""
    assert model.pieces is not None
    pieces = PieceTable(model.pieces.vectors, model.pieces.tokenizer, weight)
    return model.with_modes().with_pieces(pieces)


# ---------------------------------------------------------------- the model
def test_a_model_without_modes_encodes_every_mode_as_encode(
    tiny_model: StaticModel, modes_model: StaticModel, tmp_path: Path
) -> None:
    plain = modes_model.with_modes()  # pieces at 0.5 and no modes
    for model in (tiny_model, plain, staticsem.load(plain.save(tmp_path / "plain", dtype="float32"))):
        assert model.modes == {}
        want = model.encode(MODE_TEXTS)
        for mode in ("query", "document"):
            assert model.for_mode(mode) is model
        np.testing.assert_array_equal(model.encode_query(MODE_TEXTS), want)
        np.testing.assert_array_equal(model.encode_document(MODE_TEXTS), want)
        np.testing.assert_array_equal(model.encode_document(MODE_TEXTS[0]), model.encode(MODE_TEXTS[0]))
    assert "modes" not in json.loads((tmp_path / "plain" / "config.json").read_text())


def test_each_mode_encodes_with_its_own_piece_weight(modes_model: StaticModel) -> None:
    np.testing.assert_allclose(
        modes_model.encode_query(MODE_TEXTS), at_weight(modes_model, 1.0).encode(MODE_TEXTS), atol=1e-6
    )
    np.testing.assert_allclose(
        modes_model.encode_document(MODE_TEXTS), at_weight(modes_model, 0.0).encode(MODE_TEXTS), atol=1e-6
    )
    np.testing.assert_array_equal(
        modes_model.encode(MODE_TEXTS), at_weight(modes_model, 0.5).encode(MODE_TEXTS)
    )
    rows = [modes_model.encode_query(MODE_TEXTS), modes_model.encode_document(MODE_TEXTS)]
    assert (
        np.abs(rows[0] - rows[1]).max() > 0.05
        and np.abs(rows[0] - modes_model.encode(MODE_TEXTS)).max() > 0.05
    )
    known = "the king and the queen"  # no unknown word: every mode alike
    np.testing.assert_array_equal(modes_model.encode_query(known), modes_model.encode(known))
    np.testing.assert_array_equal(modes_model.encode_document(known), modes_model.encode(known))
    assert modes_model.for_mode("search_query") is modes_model.for_mode("query")
    with pytest.raises(InputError, match="unknown encoding mode 'passage'; choose one of query, document"):
        modes_model.for_mode("passage")


def test_modes_are_saved_and_loaded(modes_model: StaticModel, tmp_path: Path) -> None:
    for dtype in ("float32", "int8"):
        back = staticsem.load(modes_model.save(tmp_path / dtype, dtype=dtype))
        assert back.modes == {"query": ModeSettings(1.0), "document": ModeSettings(0.0)}
        tolerance = 1e-6 if dtype == "float32" else 3e-2
        np.testing.assert_allclose(
            back.encode_query(MODE_TEXTS), modes_model.encode_query(MODE_TEXTS), atol=tolerance
        )
        np.testing.assert_allclose(
            back.encode_document(MODE_TEXTS), modes_model.encode_document(MODE_TEXTS), atol=tolerance
        )
    config = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert config["modes"] == {"query": {"piece_weight": 1.0}, "document": {"piece_weight": 0.0}}
    assert config["subwords"]["weight"] == 0.5
    assert staticsem.load(tmp_path / "float32", dim=8).modes == back.modes  # truncated: modes kept
    one = modes_model.with_modes(document=ModeSettings(piece_weight=1.0))
    assert staticsem.load(one.save(tmp_path / "one")).modes == {"document": ModeSettings(1.0)}
    assert modes_model.modes["document"] == ModeSettings(0.0)  # with_modes made a new model


def searching(model: StaticModel, seed: int = 0) -> StaticModel:
    """``model`` with a random ``search`` row set both modes encode with (the query at piece weight 1)."""
    assert model.pieces is not None
    rng = np.random.default_rng(seed)
    rows = RowSet(
        rng.normal(size=model.vectors.shape).astype(np.float32),
        rng.normal(size=model.pieces.vectors.shape).astype(np.float32),
    )
    return model.with_row_set("search", rows).with_modes(
        query={"rows": "search", "piece_weight": 1.0}, document={"rows": "search"}
    )


def test_modes_encode_with_rows_of_their_own_and_encode_with_the_models(
    modes_model: StaticModel, tmp_path: Path
) -> None:
    model = searching(modes_model)
    rows = model.row_sets["search"]
    assert rows.pieces is not None and modes_model.pieces is not None
    own = StaticModel(
        model.vocab,
        rows.vectors,
        tokenizer=model.tokenizer,
        pieces=PieceTable(rows.pieces, model.tokenizer, 1.0),
    )
    np.testing.assert_allclose(model.encode_query(MODE_TEXTS), own.encode(MODE_TEXTS), atol=1e-6)
    at_half = own.with_pieces(PieceTable(rows.pieces, model.tokenizer, modes_model.pieces.weight))
    np.testing.assert_allclose(model.encode_document(MODE_TEXTS), at_half.encode(MODE_TEXTS), atol=1e-6)
    np.testing.assert_array_equal(model.encode(MODE_TEXTS), modes_model.with_modes().encode(MODE_TEXTS))
    for dtype in ("float32", "float16", "int8"):
        back = staticsem.load(model.save(tmp_path / dtype, dtype=dtype))
        assert back.modes == model.modes and set(back.row_sets) == {"search"}
        tolerance = 1e-6 if dtype == "float32" else 3e-2
        np.testing.assert_allclose(
            back.encode_query(MODE_TEXTS), model.encode_query(MODE_TEXTS), atol=tolerance
        )
    config = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert config["modes"]["document"] == {"rows": "search"}
    narrow = model.truncate(8)
    np.testing.assert_allclose(narrow.row_sets["search"].vectors, rows.vectors[:, :8])
    assert narrow.encode_query(MODE_TEXTS).shape == (len(MODE_TEXTS), 8)


def test_an_int8_row_set_is_saved_as_int8_and_encodes_as_its_float_rows(
    modes_model: StaticModel, tmp_path: Path
) -> None:
    model = searching(modes_model)
    float_rows = model.row_sets["search"]
    small = model.with_row_set("search", float_rows.quantized())
    rows = small.row_sets["search"]
    assert rows.vectors.dtype == np.int8 and rows.scales is not None
    assert rows.select(np.array([2, 0])).scales.tolist() == rows.scales[[2, 0]].tolist()  # type: ignore[union-attr]
    from safetensors.numpy import load_file

    for dtype in ("float16", "int8"):
        tensors = load_file(str(small.save(tmp_path / dtype, dtype=dtype) / "model.safetensors"))
        for name in ("rows.search", "rows.search.pieces"):
            assert tensors[name].dtype == np.int8 and tensors[f"{name}.scales"].dtype == np.float32
        back = staticsem.load(tmp_path / dtype)
        np.testing.assert_array_equal(back.row_sets["search"].vectors, rows.vectors)
        np.testing.assert_allclose(back.row_sets["search"].scales, rows.scales)  # type: ignore[arg-type]
        np.testing.assert_allclose(back.encode_query(MODE_TEXTS), model.encode_query(MODE_TEXTS), atol=2e-2)
        np.testing.assert_allclose(back.encode(MODE_TEXTS), model.encode(MODE_TEXTS), atol=2e-2)
        again = load_file(str(back.save(tmp_path / f"{dtype}-again", dtype=dtype) / "model.safetensors"))
        np.testing.assert_array_equal(again["rows.search.pieces"], tensors["rows.search.pieces"])
    float32 = load_file(str(small.save(tmp_path / "f32", dtype="float32") / "model.safetensors"))
    assert float32["rows.search"].dtype == np.float32 and "rows.search.scales" not in float32
    cosines = [
        float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
        for a, b in zip(small.encode_query(MODE_TEXTS), model.encode_query(MODE_TEXTS), strict=True)
    ]
    assert min(cosines) > 0.999
    assert not np.array_equal(small.encode_query(MODE_TEXTS), model.encode(MODE_TEXTS))
    narrow = small.truncate(8).row_sets["search"]
    assert narrow.vectors.shape[1] == 8 and narrow.scales is rows.scales
    with pytest.raises(ModelFormatError, match="int8 rows need one finite scale per row"):
        model.with_row_set("search", RowSet(rows.vectors, float_rows.pieces))
    with pytest.raises(ModelFormatError, match="int8 rows need one finite scale per row"):
        model.with_row_set("search", RowSet(float_rows.vectors, float_rows.pieces, rows.scales))
    with pytest.raises(ModelFormatError, match="int8 rows need one finite scale per row"):
        model.with_row_set("search", RowSet(rows.vectors, float_rows.pieces, rows.scales[:-1]))  # type: ignore[index]


def test_a_mode_refuses_rows_that_are_missing_or_do_not_fit(modes_model: StaticModel) -> None:
    with pytest.raises(
        ModelFormatError, match="mode 'query' encodes with rows 'search', which the model lacks"
    ):
        modes_model.with_modes(query={"rows": "search"})
    with pytest.raises(ModelFormatError, match="a mode's rows must be a name"):
        modes_model.with_modes(query={"rows": "a.b"})
    with pytest.raises(ModelFormatError, match="a row set's name must be letters, digits, _ or -, got 'a.b'"):
        modes_model.with_row_set(
            "a.b", RowSet(modes_model.vectors.astype(np.float32), modes_model.pieces.vectors)
        )  # type: ignore[union-attr]
    assert modes_model.pieces is not None
    short = RowSet(modes_model.vectors[:-1].astype(np.float32), modes_model.pieces.vectors)
    with pytest.raises(ModelFormatError, match=r"row set 'search': its rows have shape \(\d+, \d+\)"):
        modes_model.with_row_set("search", short)
    lacking = RowSet(modes_model.vectors.astype(np.float32), None)
    with pytest.raises(ModelFormatError, match="row set 'search': its pieces have shape None"):
        modes_model.with_row_set("search", lacking)


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ({"query": {"term_weights": "idf"}}, "mode 'query': unknown setting 'term_weights'"),
        ({"classification": {"piece_weight": 1}}, "unknown encoding mode 'classification'"),
        ({"query": {"piece_weight": 2}}, "piece_weight must be a number within 0..1, got 2"),
        ({"query": {"piece_weight": True}}, "within 0..1, got True"),
        ({"document": 1.0}, "mode 'document': settings must be an object"),
        ([1.0], "'modes' must be an object"),
    ],
)
def test_a_bad_modes_entry_is_refused_naming_it(
    modes_model: StaticModel, tmp_path: Path, modes: object, message: str
) -> None:
    folder = modes_model.save(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "modes": modes}))
    with pytest.raises(ModelFormatError, match=message) as caught:
        staticsem.load(folder)
    assert str(caught.value).startswith(str(folder))


def test_a_piece_weight_needs_pieces(tiny_model: StaticModel) -> None:
    with pytest.raises(
        ModelFormatError, match="a mode sets piece_weight but the model has no subword pieces"
    ):
        tiny_model.with_modes(query={"piece_weight": 1.0})


@pytest.mark.parametrize("fmt", EXPORTS)
def test_an_export_says_in_one_line_that_it_drops_the_modes(
    modes_model: StaticModel, tmp_path: Path, caplog: pytest.LogCaptureFixture, fmt: str
) -> None:
    for model, name in ((modes_model, "with"), (modes_model.with_modes(), "without")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            staticsem.io.export(model, tmp_path / f"{name}.{fmt}", fmt)
        said = [r.getMessage() for r in caplog.records if "encoding modes" in r.getMessage()]
        if model.modes:
            assert len(said) == 1 and "\n" not in said[0], said
            assert (
                "files cannot hold encoding modes (query: piece_weight 1; document: piece_weight 0)"
                in said[0]
            )
        else:
            assert said == []


# ---------------------------------------------------------------- the CLI
def test_encode_as_query_or_document(modes_model: StaticModel, tmp_path: Path) -> None:
    folder = modes_model.save(tmp_path / "m", dtype="float32")
    (tmp_path / "texts.txt").write_text("\n".join(MODE_TEXTS) + "\n", encoding="utf-8")
    for mode, method in (("query", modes_model.encode_query), ("document", modes_model.encode_document)):
        code, _, err = run(
            "encode", folder, "-i", tmp_path / "texts.txt", "-o", tmp_path / f"{mode}.npy", "--as", mode
        )
        assert code == 0, err
        np.testing.assert_allclose(np.load(tmp_path / f"{mode}.npy"), method(MODE_TEXTS), atol=1e-6)
    code, _, err = run(
        "encode", folder, "-i", tmp_path / "texts.txt", "-o", tmp_path / "x.npy", "--as", "passage"
    )
    assert code == 2 and "unknown encoding mode 'passage'" in err


def test_encode_as_writes_parquet_shards_in_that_mode(modes_model: StaticModel, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    folder = modes_model.save(tmp_path / "m", dtype="float32")
    (tmp_path / "texts.txt").write_text("\n".join(MODE_TEXTS) + "\n", encoding="utf-8")
    code, _, err = run(
        "encode", folder, "-i", tmp_path / "texts.txt", "-o", tmp_path / "out", "--as", "document"
    )
    assert code == 0, err
    rows = np.array(pq.read_table(tmp_path / "out").column("vector").to_pylist(), np.float32)
    np.testing.assert_allclose(rows, modes_model.encode_document(MODE_TEXTS), atol=1e-6)


def test_the_modes_command_shows_sets_and_clears_modes_in_place(
    modes_model: StaticModel, tmp_path: Path
) -> None:
    folder = modes_model.with_modes().save(tmp_path / "m")
    weights = (folder / "model.safetensors").read_bytes()
    code, out, _ = run("modes", folder)
    assert code == 0 and "none (queries and documents encode as encode)" in out
    code, _, err = run("modes", folder, "--query-piece-weight", "1", "--document-piece-weight", "0.25")
    assert code == 0 and "query: piece_weight 1; document: piece_weight 0.25" in err
    assert staticsem.load(folder).modes == {"query": ModeSettings(1.0), "document": ModeSettings(0.25)}
    assert (folder / "model.safetensors").read_bytes() == weights  # only config.json is rewritten
    code, _, _ = run("modes", folder, "--document-piece-weight", "0")  # the query mode stays
    assert code == 0 and staticsem.load(folder).modes == {
        "query": ModeSettings(1.0),
        "document": ModeSettings(0.0),
    }
    code, out, _ = run("info", folder)
    assert code == 0 and "query: piece_weight 1; document: piece_weight 0" in out
    code, _, _ = run("modes", folder, "--clear")
    assert code == 0 and staticsem.load(folder).modes == {}
    assert not list(folder.glob(".*tmp"))


def test_the_modes_command_refuses_what_it_cannot_do(
    modes_model: StaticModel, tiny_model: StaticModel, tmp_path: Path
) -> None:
    code, _, err = run("modes", tiny_model.save(tmp_path / "tiny"), "--query-piece-weight", "1")
    assert code == 2 and "has no subword pieces" in err
    vec = staticsem.io.export(modes_model, tmp_path / "m.vec", "word2vec")
    code, _, err = run("modes", vec, "--clear")
    assert code == 2 and "write one with --out FOLDER" in err
    code, _, err = run("modes", tmp_path / "tiny", "--query-piece-weight", "1.5")
    assert code == 2 and "Invalid value for '--query-piece-weight'" in err
    folder = modes_model.with_modes().save(tmp_path / "src", dtype="float32")
    code, _, err = run("modes", folder, "--query-piece-weight", "1", "--out", tmp_path / "copy")
    assert code == 0, err
    assert staticsem.load(folder).modes == {}
    copy = staticsem.load(tmp_path / "copy")
    assert copy.modes == {"query": ModeSettings(1.0)} and copy.dtype == "float32"


# ---------------------------------------------------------------- the index
def test_the_index_encodes_documents_as_documents_and_queries_as_queries(
    modes_model: StaticModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from staticsem.search import Index

    folder = modes_model.save(tmp_path / "m", dtype="float32")
    model = staticsem.load(folder)
    docs = [{"id": str(i), "text": t} for i, t in enumerate(MODE_TEXTS)]
    with Index.build(folder, docs, tmp_path / "index", dtype="float32") as index:
        hits = index.search(QUERY, len(docs), mode="dense", exact=True)
        assert len(hits) == len(docs)
        query = model.encode_query(QUERY)
        for hit in hits:
            assert hit.score == pytest.approx(float(query @ model.encode_document(hit.text)), abs=1e-5)
        assert index.info()["model"]["document_mode"] == {"piece_weight": 0.0}
    changed = model.with_modes(query={"piece_weight": 1.0}, document={"piece_weight": 1.0})
    with caplog.at_level(logging.WARNING):
        Index.open(tmp_path / "index", changed, read_only=True).close()
    assert "its documents were encoded in document mode {'piece_weight': 0.0}" in caplog.text


# ---------------------------------------------------------------- the server
def test_embeddings_take_an_input_type(modes_model: StaticModel) -> None:
    kinds = {
        None: modes_model.encode,
        "query": modes_model.encode_query,
        "search_query": modes_model.encode_query,
        "document": modes_model.encode_document,
        "search_document": modes_model.encode_document,
    }
    with TestClient(create_app(modes_model)) as client:
        for kind, method in kinds.items():
            body = {"input": MODE_TEXTS, **({} if kind is None else {"input_type": kind})}
            response = client.post("/v1/embeddings", json=body)
            assert response.status_code == 200, response.text
            got = np.array([row["embedding"] for row in response.json()["data"]], np.float32)
            np.testing.assert_allclose(got, method(MODE_TEXTS), atol=1e-6, err_msg=str(kind))
        response = client.post("/v1/embeddings", json={"input": "a cat", "input_type": "passage"})
        assert response.status_code == 422 and "input_type" in response.text


# ---------------------------------------------------------------- evaluation
class ModeSpy:
    """``model``'s encoding, recording the texts each of its methods was given."""

    def __init__(self, model: StaticModel) -> None:
        self.model = model
        self.seen: dict[str, set[str]] = {}

    def _call(self, method: str, texts: list[str]) -> np.ndarray:
        self.seen.setdefault(method, set()).update(texts)
        return getattr(self.model, method)(texts)  # type: ignore[no-any-return]

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._call("encode", texts)

    def encode_query(self, texts: list[str]) -> np.ndarray:
        return self._call("encode_query", texts)

    def encode_document(self, texts: list[str]) -> np.ndarray:
        return self._call("encode_document", texts)


def test_retrieval_evaluation_encodes_queries_and_documents_in_their_modes(
    modes_model: StaticModel, tmp_path: Path
) -> None:
    from staticsem.eval.retrieval import Retrieval

    folder = tmp_path / "retrieval" / "toy"
    (folder / "qrels").mkdir(parents=True)
    corpus = [json.dumps({"_id": f"d{i}", "title": "", "text": t}) for i, t in enumerate(MODE_TEXTS)]
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": QUERY}) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td1\t1\n", encoding="utf-8")
    spy = ModeSpy(modes_model)
    Retrieval(tmp_path)(spy)
    assert spy.seen == {"encode_query": {QUERY}, "encode_document": set(MODE_TEXTS)}


def test_mteb_asks_for_queries_and_documents_in_their_modes(modes_model: StaticModel) -> None:
    from mteb.types import PromptType

    from staticsem.eval.mteb_adapter import MTEBEncoder

    encoder = MTEBEncoder(modes_model)
    for prompt, method in (
        (PromptType.query, modes_model.encode_query),
        (PromptType.document, modes_model.encode_document),
        (None, modes_model.encode),
    ):
        got = encoder.encode(
            [{"text": MODE_TEXTS}],  # type: ignore[arg-type]  # MTEB's batches
            task_metadata=None,  # type: ignore[arg-type]
            hf_split="test",
            hf_subset="default",
            prompt_type=prompt,
        )
        np.testing.assert_array_equal(got, method(MODE_TEXTS), err_msg=str(prompt))


def test_setting_both_modes_piece_weight_keeps_their_rows(modes_model: StaticModel) -> None:
    """What a build does last (``with_search_modes``) and the pairs study do to a model with search rows."""
    from staticsem.distillation.methods.swe.rows import with_search_modes

    model = with_search_modes(searching(modes_model), 0.5, 0.75)
    assert model.modes == {
        "query": ModeSettings(piece_weight=0.75, rows="search"),
        "document": ModeSettings(piece_weight=0.75, rows="search"),
    }
    assert model.pieces is not None and model.pieces.weight == 0.5
