"""Teacher backends with the packaged all-MiniLM-L6-v2: ONNX fp32 equals torch, int8 runs and is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import staticsem
from staticsem.cli import app
from staticsem.distillation.teachers import onnx as onnx_teacher
from staticsem.distillation.teachers.backends import BACKENDS
from staticsem.distillation.teachers.onnx import OnnxTransformer, weights_digest
from staticsem.distillation.teachers.teacher import Teacher, TeacherBatch
from staticsem.errors import InputError, StaticsemError

pytestmark = pytest.mark.slow

TEXTS = [
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog, while the farmer sleeps in the barn at noon.",
    "Unhappiness isn't a word; it's a feeling — naïve café owners know it well!",
    "Tokyo (東京) is Japan's capital.",
    "x",
    "Static word embeddings encode sentences hundreds of times faster than transformers on a CPU.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def teachers(cache: Path) -> dict[str, Teacher]:
    return {b: Teacher(None, backend=b, cache=cache) for b in ("torch", "onnx", "onnx-int8")}


def token_cosines(a: TeacherBatch, b: TeacherBatch) -> np.ndarray:
    x, y = a.states[a.own].numpy(), b.states[a.own].numpy()
    return (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)


@pytest.mark.parametrize("layer", [None, 2, -1])
def test_onnx_fp32_gives_the_torch_token_states(teachers: dict[str, Teacher], layer: int | None) -> None:
    want, got = teachers["torch"].forward(TEXTS, layer), teachers["onnx"].forward(TEXTS, layer)
    assert torch.equal(want.own, got.own) and torch.equal(want.offsets, got.offsets)
    assert want.own.sum() > 60
    assert token_cosines(want, got).min() >= 0.9999  # every text token
    assert (want.sentence * got.sentence).sum(1).min() >= 0.9999


def test_int8_runs_close_to_torch_but_is_really_quantised(teachers: dict[str, Teacher]) -> None:
    want, fp32, int8 = (teachers[b].forward(TEXTS) for b in ("torch", "onnx", "onnx-int8"))
    cosines = token_cosines(want, int8)
    assert cosines.mean() > 0.97 and cosines.min() > 0.8
    assert (want.sentence * int8.sentence).sum(1).min() > 0.95
    assert token_cosines(fp32, int8).min() < 0.9999  # not the fp32 graph under another name
    size = {b: teachers[b].onnx.path(None).stat().st_size for b in ("onnx", "onnx-int8")}  # type: ignore[union-attr]
    assert size["onnx-int8"] < size["onnx"] / 3  # int8 weights


def test_the_export_is_cached_by_the_weights(
    teachers: dict[str, Teacher], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teachers["onnx"].forward(TEXTS[:1])
    exported = sorted(cache.glob("teacher-onnx-*.onnx"))
    assert exported and not list(cache.glob(".export-*"))  # no temporary left behind

    def no_export(*args: object) -> None:
        raise AssertionError("exported again although the cache holds this teacher")

    monkeypatch.setattr(OnnxTransformer, "_export", no_export)
    again = Teacher(None, backend="onnx", cache=cache)
    assert torch.equal(again.forward(TEXTS[:2]).states, teachers["onnx"].forward(TEXTS[:2]).states)
    assert sorted(cache.glob("teacher-onnx-*.onnx")) == exported

    onnx = again.onnx
    assert onnx is not None
    key = onnx.key(None)
    with torch.no_grad():
        next(again.transformer.parameters())[0, 0] += 1e-3  # another teacher: another key
    assert weights_digest(again.transformer) != onnx.digest
    assert OnnxTransformer(again.transformer, again.tokenizer, "onnx", cache=cache).key(None) != key
    assert onnx.key(2) != key and onnx.key(None) == key


def test_an_export_that_differs_from_torch_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher = Teacher(None, backend="onnx", cache=tmp_path)
    assert teacher.onnx is not None
    plain = tmp_path / "plain.onnx"
    teacher.onnx._export(plain, None)
    assert teacher.onnx._check(plain, None) >= 0.9999
    with torch.no_grad():
        for p in teacher.transformer.encoder.layer[-1].output.dense.parameters():
            p.mul_(1.5)  # torch now differs from the exported graph
    assert teacher.onnx._check(plain, None) < 0.9999

    monkeypatch.setattr(OnnxTransformer, "_check", lambda self, path, layer: 0.98)
    with pytest.raises(StaticsemError, match="differs from torch"):
        Teacher(None, backend="onnx", cache=tmp_path / "other").forward(TEXTS[:1])
    assert not list((tmp_path / "other").glob("*.onnx"))


def test_the_fused_graph_is_kept_only_when_it_matches_torch(
    teachers: dict[str, Teacher],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import onnx
    from onnx import numpy_helper

    teachers["onnx"].forward(TEXTS[:1])
    exported = teachers["onnx"].onnx.path(None)  # type: ignore[union-attr]
    ops = {node.op_type for node in onnx.load(str(exported)).graph.node}
    assert {"Attention", "SkipLayerNormalization"} <= ops  # this teacher's fused graph passed and is used

    def fuse_wrongly(self: OnnxTransformer, source: Path, target: Path) -> bool:
        """A "fused" graph whose weights are off by 5 %: its states differ from torch's."""
        model = onnx.load(str(source))
        for tensor in model.graph.initializer:
            if len(tensor.dims) == 2:
                tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * 1.05, tensor.name))
        onnx.save(model, str(target))
        return True

    monkeypatch.setattr(OnnxTransformer, "_fuse", fuse_wrongly)
    caplog.set_level("INFO", logger=onnx_teacher.__name__)
    teacher = Teacher(None, backend="onnx", cache=tmp_path)
    got, want = teacher.forward(TEXTS), teachers["torch"].forward(TEXTS)
    assert token_cosines(want, got).min() >= 0.9999  # the plain graph was kept
    assert "fused graph differs from torch" in caplog.text


def test_bad_backends_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown teacher backend 'tensorrt'"):
        Teacher(None, backend="tensorrt")
    with pytest.raises(InputError, match="runs on the CPU"):
        Teacher(None, backend="onnx", device="cuda")
    with pytest.raises(InputError, match="glove method runs no teacher"):
        staticsem.distill("glove", corpus=["x.txt"], teacher_backend="onnx")
    result = CliRunner().invoke(
        app, ["distill", "--method", "token", "--out", str(tmp_path / "m"), "--teacher-backend", "fp8"]
    )
    assert result.exit_code == 2 and "unknown teacher backend 'fp8'" in result.stderr
    assert not (tmp_path / "m").exists()


def test_int8_distillation_records_its_backend(tmp_path: Path, tiny_teacher: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    subjects = ["the cat", "a dog", "the king", "a queen", "the river", "a doctor", "the nurse", "music"]
    verbs = ["sleeps near", "runs to", "sees", "likes", "follows", "finds"]
    corpus.write_text(
        "\n".join(
            f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(subjects)} today." for _ in range(300)
        )
    )
    args = [
        "distill",
        "--teacher",
        str(tiny_teacher),
        "--out",
        str(tmp_path / "swe"),
        "--corpus",
        str(corpus),
    ]
    args += ["--vocab-size", "30"]
    args += ["--min-count", "2", "--sentences-per-word", "20", "--pca-sentences", "300", "--dim", "8"]
    result = CliRunner().invoke(app, [*args, "--stages", "extract,pca", "--teacher-backend", "onnx-int8"])
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "swe" / "config.json").read_text())
    assert config["metadata"]["settings"]["teacher_backend"] == "onnx-int8"
    assert list((tmp_path / ".swe.work" / "onnx").glob("teacher-onnx-int8-*.onnx"))
    model = staticsem.load(tmp_path / "swe")
    assert model.similarity("the cat sleeps", "a cat sleeps") > 0.5

    words = tmp_path / "words.txt"
    words.write_text("cat\ndog\nking\nqueen\n")
    token = staticsem.distill(
        "token",
        teacher=str(tiny_teacher),
        vocabulary=words,
        out=tmp_path / "tok",
        dim=4,
        teacher_backend="onnx",
    )
    assert token.metadata["settings"]["teacher_backend"] == "onnx"
    saved = json.loads((tmp_path / "tok" / "config.json").read_text())
    assert saved["metadata"]["settings"]["teacher_backend"] == "onnx"


def test_backend_is_part_of_the_extraction_key(tmp_path: Path) -> None:
    from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings

    (tmp_path / "c.txt").write_text("a small corpus line here\n")
    keys = {
        backend: Pipeline(
            SWESettings(corpus=(str(tmp_path / "c.txt"),), teacher_backend=backend), tmp_path / "m"
        ).keys
        for backend in BACKENDS
    }
    assert len({k["extract"] for k in keys.values()}) == 3
    assert len({k["select"] for k in keys.values()}) == 1  # the sentence choice is reused
