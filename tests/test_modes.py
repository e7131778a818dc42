"""Encoding by purpose: query and document modes in the model, its files, the CLI, the index and the server
(the framework adapters: tests/test_integrations.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

import staticsem
from conftest import MODE_TEXTS
from staticsem import StaticModel
from staticsem.errors import InputError, ModelFormatError
from staticsem.modes import ModeSettings
from staticsem.pieces import PieceTable

EXPORTS = ["word2vec", "word2vec-binary", "glove", "fasttext", "model2vec", "sentence-transformers"]


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
