"""Bad model files raise ``ModelFormatError`` naming the file, and failed saves destroy nothing."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import staticsem
from staticsem import StaticModel
from staticsem.errors import InputError, ModelFormatError, StaticsemError
from staticsem.io import export


def load_fails(path: Path, *patterns: str, name: Path | None = None, format: str | None = None) -> None:
    """``staticsem.load`` raises a ModelFormatError naming ``name`` (default ``path``) and ``patterns``."""
    with pytest.raises(ModelFormatError) as info:
        staticsem.load(path, format=format)
    message = str(info.value)
    assert str(name or path) in message
    for pattern in patterns:
        assert re.search(pattern, message), message


def test_model_format_error_is_a_staticsem_error() -> None:
    assert issubclass(ModelFormatError, StaticsemError) and issubclass(InputError, StaticsemError)


@pytest.mark.parametrize(
    "format",
    [None, "staticsem", "word2vec", "word2vec-binary", "glove", "model2vec", "sentence-transformers"],
)
@pytest.mark.parametrize("name", ["nothing", "nothing.txt", "nothing.bin.gz"])
def test_missing_path(tmp_path: Path, name: str, format: str | None) -> None:
    load_fails(tmp_path / name, "missing|no such", format=format)


def test_folder_without_a_model(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    load_fails(tmp_path, "no model")


# ---------------------------------------------------------------- broken staticsem folders
Breakage = Callable[[Path], None]


def put(name: str, data: str | bytes) -> Breakage:
    def apply(folder: Path) -> None:
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())

    return apply


def remove(name: str) -> Breakage:
    return lambda folder: (folder / name).unlink()


def halve(name: str) -> Breakage:
    def apply(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])

    return apply


def vocab(change: Callable[[list[str]], object]) -> Breakage:
    def apply(folder: Path) -> None:
        words = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        (folder / "vocab.json").write_text(json.dumps(change(words)), encoding="utf-8")

    return apply


def tensor(name: str, array: np.ndarray) -> Breakage:
    return lambda folder: save_file({name: array}, str(folder / "model.safetensors"))


BREAKAGES: list[tuple[str, Breakage, str, str]] = [
    ("safetensors-missing", remove("model.safetensors"), "model.safetensors", "missing"),
    ("safetensors-truncated", halve("model.safetensors"), "model.safetensors", "corrupt"),
    ("safetensors-garbage", put("model.safetensors", b"\x07garbage" * 64), "model.safetensors", "corrupt"),
    ("safetensors-empty", put("model.safetensors", b""), "model.safetensors", "corrupt"),
    ("config-not-json", put("config.json", "{'format': staticsem"), "config.json", "JSON"),
    ("config-not-utf8", put("config.json", b"\xff\xfe{"), "config.json", "JSON"),
    ("config-not-a-dict", put("config.json", "[1]"), "config.json", "JSON dict"),
    (
        "metadata-not-a-dict",
        put("config.json", '{"format":"staticsem","metadata":[1]}'),
        "config.json",
        "metadata",
    ),
    ("vocab-not-json", put("vocab.json", '["the", "cat"'), "vocab.json", "JSON"),
    ("vocab-not-a-list", vocab(lambda v: {"words": v}), "vocab.json", "list"),
    ("vocab-not-strings", vocab(lambda v: [[w] for w in v]), "", "strings"),
    ("vocab-too-short", vocab(lambda v: v[:-1]), "", r"\b17\b.*\b18\b"),
    ("vocab-too-long", vocab(lambda v: [*v, "extra"]), "", r"\b19\b.*\b18\b"),
    ("vocab-duplicate", vocab(lambda v: ["cat", *v[1:]]), "", "'cat'.*more than once"),
    ("tokenizer-missing", remove("tokenizer.json"), "tokenizer.json", "missing"),
    ("tokenizer-garbage", put("tokenizer.json", '{"model": 3}'), "tokenizer.json", "tokenizer"),
    ("matrix-nan", tensor("embeddings", np.full((18, 4), np.nan, np.float32)), "", "NaN"),
    ("matrix-float64", tensor("embeddings", np.zeros((18, 4))), "", "float64"),
    ("matrix-1d", tensor("embeddings", np.zeros(18, np.float32)), "", "2-dimensional"),
    (
        "matrix-wrong-name",
        tensor("weights", np.zeros((18, 4), np.float32)),
        "model.safetensors",
        "embeddings",
    ),
]


@pytest.mark.parametrize(("breakage", "file", "pattern"), [pytest.param(*b[1:], id=b[0]) for b in BREAKAGES])
def test_broken_staticsem_folder(saved_model: Path, breakage: Breakage, file: str, pattern: str) -> None:
    breakage(saved_model)
    load_fails(saved_model, pattern, name=saved_model / file if file else saved_model)


# ---------------------------------------------------------------- the constructor
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_constructor_rejects_non_finite_values(bad: float) -> None:
    matrix = np.ones((3, 4), np.float32)
    matrix[1, 2] = bad
    with pytest.raises(ModelFormatError, match=r"NaN or infinite.*row 1.*'b'"):
        StaticModel(["a", "b", "c"], matrix)


def test_constructor_rejects_duplicate_words() -> None:
    with pytest.raises(ModelFormatError, match="'b' occurs more than once"):
        StaticModel(["a", "b", "c", "b"], np.ones((4, 2), np.float32))


@pytest.mark.parametrize("vocab", [["a", ["b"]], ["a", ""], ["a", None]])
def test_constructor_rejects_words_that_are_not_strings(vocab: list[object]) -> None:
    with pytest.raises(ModelFormatError, match="non-empty strings"):
        StaticModel(vocab, np.ones((2, 2), np.float32))  # type: ignore[arg-type]


# ---------------------------------------------------------------- broken vector files
BAD_TEXT_FILES = [
    pytest.param(b"2 3\ncat 0.1 nan 0.3\ndog 1 2 3\n", r"NaN", id="nan"),
    pytest.param(b"2 3\ncat 0.1 inf 0.3\ndog 1 2 3\n", r"NaN or infinite", id="inf"),
    pytest.param(
        b"2 3\ncat 0.1 0.2 0.3\ndog 1 2 1e39\n",
        r"NaN or infinite",
        id="float32-overflow",
        marks=pytest.mark.filterwarnings("ignore:overflow encountered"),
    ),
    pytest.param(
        b"5 3\ncat 0.1 0.2 0.3\ndog 1 2 3\n", r"announces 5 words.*holds 2.*truncated", id="truncated"
    ),
    pytest.param(
        b"3 3\ncat 0.1 0.2 0.3\ndog 1 2\nsun 1 2 3\n",
        r":3: expected a word and 3 values, got 2",
        id="short-row",
    ),
    pytest.param(b"2 3\ncat 0.1 0.2 0.3\ndog 1 2 3 4\n", r":3: .*got 4", id="long-row"),
    pytest.param(b"2 3\ncat 0.1 0.2 0.3\ndog 1 two 3\n", r":3: values are not numbers", id="not-numbers"),
    pytest.param(b"cat 0.1 0.2 0.3\ndog 1 2\n", r":2: expected a word and 3 values", id="glove-short-row"),
    pytest.param(b"2 3\ncaf\xe9 0.1 0.2 0.3\ndog 1 2 3\n", r"UTF-8", id="latin1-first-word"),
    pytest.param(
        b"3 3\ncat 0.1 0.2 0.3\ndog 1 2 3\ncaf\xe9 1 2 3\n",
        r":4: word is not valid UTF-8",
        id="latin1-later-word",
    ),
    pytest.param(b"", r"no vectors", id="empty"),
    pytest.param(b"\n\n", r"no vectors", id="blank-lines"),
    pytest.param(b"0 3\n", r"no vectors", id="header-only"),
    pytest.param(b"2 3\n\x00\x01\x02", r"ends at word 1 of 2 \(truncated\?\)", id="binary-junk"),
    pytest.param(b"\x00\x01\x02 hello", r"not a vector file", id="no-header-binary"),
]


@pytest.mark.parametrize("suffix", [".txt", ".vec", ".txt.gz"])
@pytest.mark.parametrize(("content", "pattern"), BAD_TEXT_FILES)
def test_broken_text_vector_file(tmp_path: Path, content: bytes, pattern: str, suffix: str) -> None:
    path = tmp_path / f"vectors{suffix}"
    path.write_bytes(gzip.compress(content) if suffix.endswith(".gz") else content)
    load_fails(path, pattern)


@pytest.fixture()
def binary_file(tiny_model: StaticModel, tmp_path: Path) -> Path:
    return export(tiny_model, tmp_path / "vectors.bin", "word2vec-binary")


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.99])
def test_truncated_binary_file(binary_file: Path, keep: float) -> None:
    data = binary_file.read_bytes()
    binary_file.write_bytes(data[: int(len(data) * keep)])
    load_fails(binary_file, "truncated")


def test_binary_file_cut_between_words(tiny_model: StaticModel, binary_file: Path) -> None:
    data = binary_file.read_bytes()
    row = len(tiny_model.vocab[0]) + 1 + 4 * tiny_model.dim + 1  # word, space, vector, newline
    binary_file.write_bytes(data[: data.index(b"\n") + 1 + row])
    load_fails(binary_file, r"ends at word 2 of 18")


def test_binary_file_with_a_non_utf8_word(tmp_path: Path) -> None:
    path = tmp_path / "vectors.bin"
    vectors = np.ones((2, 3), "<f4").tobytes()
    path.write_bytes(b"2 3\ncat " + vectors[:12] + b"\ncaf\xe9 " + vectors[12:] + b"\n")
    load_fails(path, r"word 2: word is not valid UTF-8")


@pytest.mark.parametrize("name", ["model.bin", "model.vec", "model.bin.gz"])
def test_fasttext_bin_says_to_use_the_vec(tmp_path: Path, name: str) -> None:
    content = (793712314).to_bytes(4, "little") + (12).to_bytes(4, "little") + bytes(range(256)) * 4
    path = tmp_path / name
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    load_fails(path, r"fastText", r"\.vec")


@pytest.mark.parametrize(
    "content",
    [b"not gzip at all\n", gzip.compress(b"3 2\na 1 2\nb 3 4\nc 5 6\n" * 50)[:40]],
    ids=["not-gzip", "truncated-gzip"],
)
def test_broken_gzip_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "vectors.txt.gz"
    path.write_bytes(content)
    load_fails(path)


# ---------------------------------------------------------------- Sentence Transformer folders
def test_transformer_sentence_transformer_is_not_a_static_model(tmp_path: Path) -> None:
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    load_fails(folder, r"without a static embedding", r"Transformer")
    # the same with the files a real transformer folder has beside modules.json
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 4}))
    (folder / "tokenizer.json").write_text("{}")
    save_file(
        {"embeddings.word_embeddings.weight": np.zeros((3, 4), np.float32)}, str(folder / "model.safetensors")
    )
    load_fails(folder, r"without a static embedding", r"Transformer")
    (folder / "config_sentence_transformers.json").write_text("{}")
    load_fails(folder, r"without a static embedding", r"Transformer")


def test_sentence_transformer_folder_with_bad_modules_json(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text("[{")
    load_fails(tmp_path, r"JSON", name=tmp_path / "modules.json")


@pytest.mark.parametrize("fmt", ["model2vec", "sentence-transformers"])
def test_hf_folder_whose_tokenizer_does_not_fit_the_matrix(
    tiny_model: StaticModel, tmp_path: Path, fmt: str
) -> None:
    folder = export(tiny_model, tmp_path / "out", fmt)
    save_file(
        {"embeddings": np.ones((4, 3), np.float32), "embedding.weight": np.ones((4, 3), np.float32)},
        str(folder / "model.safetensors"),
    )
    load_fails(folder, r"19 tokens.*4 rows")


# ---------------------------------------------------------------- saving never destroys data
@pytest.mark.parametrize("fmt", ["staticsem", "model2vec", "sentence-transformers"])
def test_failed_save_leaves_the_old_model(
    tiny_model: StaticModel, saved_model: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    before = sorted(p.name for p in saved_model.parent.iterdir())
    monkeypatch.setattr("staticsem.io.atomic.save_file", broken)  # write_tensors: every model format
    with pytest.raises(OSError, match="disk full"):
        export(tiny_model.truncate(3), saved_model, fmt)
    assert sorted(p.name for p in saved_model.parent.iterdir()) == before  # no temporary folder left
    assert staticsem.load(saved_model).dim == 16


@pytest.mark.parametrize("fmt", ["staticsem", "model2vec", "sentence-transformers", "word2vec"])
@pytest.mark.parametrize("files", [["thesis.tex"], ["config.json", "thesis.tex"]])
def test_saving_over_a_folder_without_a_model(
    tiny_model: StaticModel, tmp_path: Path, fmt: str, files: list[str]
) -> None:
    folder = tmp_path / "documents"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("{}")
    with pytest.raises(InputError):
        export(tiny_model, folder, fmt)
    assert [p.name for p in tmp_path.iterdir()] == ["documents"]
    assert sorted(p.name for p in folder.iterdir()) == files


def test_saving_over_a_file(tiny_model: StaticModel, tmp_path: Path) -> None:
    (tmp_path / "model").write_text("precious")
    with pytest.raises(InputError, match="not a folder"):
        tiny_model.save(tmp_path / "model")
    assert (tmp_path / "model").read_text() == "precious"


def test_saving_over_an_old_model_replaces_it(tiny_model: StaticModel, saved_model: Path) -> None:
    tiny_model.truncate(3).save(saved_model)
    assert staticsem.load(saved_model).dim == 3
    assert [p.name for p in saved_model.parent.iterdir()] == [saved_model.name]
