"""The command line: every command's happy path and bad input (one-line errors, exit code 2, no output)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import staticsem
from staticsem.cli import app

runner = CliRunner()


def run(*args: str, input: str | bytes | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=input)
    return result.exit_code, result.stdout, result.stderr


def assert_user_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_encode_npy_keeps_order_and_empty_lines(saved_model: Path, tmp_path: Path) -> None:
    texts = ["the cat sat", "", "a happy dog", "zzz", "The house\x00of the KING", "x" * 1_000_000 + " cat"]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    code, _, stderr = run("encode", saved_model, "--input", source, "--output", tmp_path / "out.npy")
    assert code == 0, stderr
    got = np.load(tmp_path / "out.npy")
    model = staticsem.load(saved_model)
    expected = model.encode([t.replace("\x00", " ") for t in texts])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert not got[1].any() and not got[3].any()  # empty line and unknown words: zero rows
    np.testing.assert_allclose(got[4], model.encode("The house of the KING"), atol=1e-6)  # NUL = space


def test_encode_jsonl_from_stdin(saved_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code, _, stderr = run("encode", saved_model, "-i", "-", "-o", out, input="the cat\r\nhappy dog\n")
    assert code == 0, stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in records] == [0, 1]
    np.testing.assert_allclose(
        records[1]["embedding"], staticsem.load(saved_model).encode("happy dog"), atol=1e-6
    )


def test_encode_non_utf8_is_an_error_that_writes_nothing(saved_model: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"fine line\nbad \xff byte\n")
    out = tmp_path / "out.npy"
    code, _, stderr = run("encode", saved_model, "-i", source, "-o", out)
    assert_user_error(code, stderr, f"{source}:2", "not valid UTF-8", "0xff")
    assert not out.exists() and sorted(tmp_path.iterdir()) == sorted([saved_model, source])
    code, _, stderr = run("encode", saved_model, "-i", source, "-o", out, "--errors", "replace")
    assert code == 0 and np.load(out).shape[0] == 2


def test_encode_keeps_existing_output_on_error(saved_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    out.write_bytes(b"precious")
    (tmp_path / "bad.txt").write_bytes(b"\xc3\x28\n")
    code, _, stderr = run("encode", saved_model, "-i", tmp_path / "bad.txt", "-o", out)
    assert_user_error(code, stderr, ":1")
    assert out.read_bytes() == b"precious"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["encode", "{missing}", "-i", "{input}", "-o", "{out}"], ["no such file or folder"]),
        (["encode", "{model}", "-i", "{missing}", "-o", "{out}"], ["input file is missing"]),
        (["encode", "{model}", "-i", "{input}", "-o", "{tmp}/out.csv"], [".npy or .jsonl"]),
        (["neighbors", "{model}", "qqqq"], ["'qqqq' is not in the vocabulary"]),
        (["convert", "{model}", "{tmp}/x", "--to", "pickle"], ["unknown format 'pickle'"]),
        (["convert", "{model}", "{tmp}/x", "--dtype", "int4"], ["unknown dtype 'int4'"]),
        (["similarity", "{corrupt}", "a", "b"], ["corrupt or truncated"]),
        (["info", "{input}"], ["in.txt:1", "values are not numbers"]),
    ],
)
def test_user_errors(saved_model: Path, tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    (tmp_path / "in.txt").write_text("hello world\n")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for item in saved_model.iterdir():
        (corrupt / item.name).write_bytes(item.read_bytes())
    (corrupt / "model.safetensors").write_bytes((saved_model / "model.safetensors").read_bytes()[:100])
    names = {
        "model": saved_model,
        "missing": tmp_path / "nope",
        "input": tmp_path / "in.txt",
        "out": tmp_path / "out.npy",
        "tmp": tmp_path,
        "corrupt": corrupt,
    }
    code, _, stderr = run(*[a.format(**names) for a in args])
    assert_user_error(code, stderr, *fragments)
    assert not (tmp_path / "out.npy").exists()


def test_similarity_neighbors_analogy_info(saved_model: Path) -> None:
    code, stdout, _ = run("similarity", saved_model, "the cat", "The cat!")
    assert code == 0 and float(stdout) == pytest.approx(1.0, abs=1e-3)
    code, stdout, _ = run("neighbors", saved_model, "cat", "-k", "3")
    model = staticsem.load(saved_model)
    assert code == 0 and all(w in stdout for w, _ in model.most_similar("cat", 3))
    code, stdout, _ = run("analogy", saved_model, "man", "king", "woman", "-k", "2")
    assert code == 0 and model.analogy("man", "king", "woman", 1)[0][0] in stdout
    code, stdout, _ = run("info", saved_model)
    assert code == 0 and "staticsem" in stdout and "float16" in stdout and str(len(model)) in stdout


def test_convert_round_trip_and_dim(saved_model: Path, tmp_path: Path) -> None:
    code, _, stderr = run("convert", saved_model, tmp_path / "m.vec", "--to", "fasttext", "--dim", "8")
    assert code == 0, stderr
    back, source = staticsem.load(tmp_path / "m.vec"), staticsem.load(saved_model)
    assert back.dim == 8 and back.vocab == source.vocab
    np.testing.assert_array_equal(back.vectors, source.vectors[:, :8].astype(np.float32))  # float16 is exact
    code, _, _ = run("convert", tmp_path / "m.vec", tmp_path / "q", "--dtype", "int8", "--scale", "model")
    small = staticsem.load(tmp_path / "q")
    assert code == 0 and small.dtype == "int8" and small.scales is not None
    assert json.loads((tmp_path / "q" / "config.json").read_text())["int8_scale"] == "model"
    np.testing.assert_array_equal(small.scales, np.abs(back.vectors).max() / 127)  # one scale for all rows
    np.testing.assert_allclose(small.vectors * small.scales[:, None], back.vectors, atol=small.scales[0] / 2)


@pytest.mark.parametrize(
    "command", ["encode", "similarity", "neighbors", "analogy", "convert", "info", "modes", "distill", "push"]
)
def test_every_command_has_help_with_example(command: str) -> None:
    code, stdout, _ = run(command, "--help")
    assert code == 0 and "Example" in stdout


def test_usage_error_exits_2() -> None:
    code, _, _ = run("encode")
    assert code == 2
