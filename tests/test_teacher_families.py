"""Teacher families (``families.py``: BERT mean, CLS with an instruction prompt and INSTRUCTOR's pooling,
one saved with ``truncate_dim``; XLM-R Unigram, MPNet, ModernBERT, Qwen3, Gemma 3 text with Dense modules).
Each distils end to end on the default backend (one that ONNX cannot export runs on torch, saying why in one
line) and config.json records the prompt text it read; stage 1's word vectors are the teacher's token states
recomputed sentence by sentence; its targets are sentence-transformers' own ``encode`` with the same prompt.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from typer.testing import CliRunner

import staticsem
from fakes import write_corpus
from families import FAMILIES, TEXTS, build_family
from staticsem.cli import app
from staticsem.distillation.stages.extract import Extraction, extract
from staticsem.distillation.teachers.onnx import ExportError, OnnxTransformer
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.text import word_pattern

NAMES = list(FAMILIES)
NOT_EXPORTED = {"gemma3-dense": "gemma3_text"}  # its bidirectional mask is vmap'd: TorchScript fails


@pytest.fixture(scope="session")
def teacher_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A family's teacher folder, built on first use (a fraction of a second each)."""
    base = tmp_path_factory.mktemp("families")
    return functools.cache(lambda name: build_family(FAMILIES[name], base / name))


@pytest.fixture(scope="session")
def stage_one(teacher_of: Callable[[str], Path]) -> Callable[[str], tuple[Teacher, list[str], Extraction]]:
    """A family's torch teacher, the words of ``TEXTS`` and stage 1 over them (batches of 3 sentences of
    several lengths: padding on the teacher's side), made once."""

    @functools.cache
    def run(name: str) -> tuple[Teacher, list[str], Extraction]:
        teacher = Teacher(str(teacher_of(name)), prompt=FAMILIES[name].prompt)
        words = sorted({key(w, teacher.lowercases) for text in TEXTS for w in word_pattern().findall(text)})
        found = extract(
            teacher, TEXTS, words, lowercase=teacher.lowercases, batch_size=3, show_progress=False
        )
        return teacher, words, found

    return run


def key(word: str, lowercase: bool) -> str:
    return word.lower() if lowercase else word


def alone(teacher: Teacher, text: str) -> list[tuple[str, np.ndarray, int]]:
    """``text`` alone through the teacher's own ``transformers`` tokenizer and model: each word with the mean
    of its tokens' last-layer states and their number. A word's tokens are those whose characters, leading
    whitespace aside, first fall in it; a token of whitespace alone marks the word after it; the prompt's
    tokens and the special ones belong to no word."""
    first, prompt = teacher.model[0], teacher.prompt
    inputs = first.tokenizer(
        prompt + text,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        truncation=True,
        max_length=first.max_seq_length,
        return_tensors="pt",
    )
    offsets, special = inputs.pop("offset_mapping")[0].tolist(), inputs.pop("special_tokens_mask")[0].tolist()
    with torch.no_grad():
        states = first.auto_model(**inputs).last_hidden_state[0].float().numpy()
    spans = [m.span() for m in word_pattern().finditer(text)]
    tokens: dict[int, list[int]] = {}
    for position, (start, end) in enumerate(offsets):
        start, end = max(start - len(prompt), 0), end - len(prompt)
        if special[position] or end <= 0:
            continue
        while start < end and text[start].isspace():
            start += 1
        word = next((i for i, (a, b) in enumerate(spans) if a < max(end, start + 1) and b > start), None)
        if word is not None:
            tokens.setdefault(word, []).append(position)
    return [
        (text[slice(*spans[w])], states[found].mean(0), len(found)) for w, found in sorted(tokens.items())
    ]


@pytest.mark.parametrize("name", NAMES)
def test_stage_one_reads_each_word_s_own_tokens(
    name: str, stage_one: Callable[[str], tuple[Teacher, list[str], Extraction]]
) -> None:
    teacher, words, found = stage_one(name)
    sums, counts = np.zeros((len(words), teacher.hidden_size)), np.zeros(len(words))
    pieces = []
    for text in TEXTS:
        for word, state, tokens in alone(teacher, text):
            row = words.index(key(word, teacher.lowercases))
            sums[row] += state
            counts[row] += 1
            pieces.append(tokens)
    assert max(pieces) > 2 and np.mean(pieces) > 1.2  # words of several tokens: their own must be read
    assert found.counts.tolist() == counts.tolist()
    np.testing.assert_allclose(found.vectors(), sums / counts[:, None], atol=2e-5)


@pytest.mark.parametrize("name", NAMES)
def test_targets_are_sentence_transformers_own_encode(
    name: str,
    stage_one: Callable[[str], tuple[Teacher, list[str], Extraction]],
    teacher_of: Callable[[str], Path],
) -> None:
    from sentence_transformers import SentenceTransformer

    family = FAMILIES[name]
    teacher, _, found = stage_one(name)
    model = SentenceTransformer(str(teacher_of(name)), device="cpu", local_files_only=True)
    asked = {"prompt_name": family.prompt} if family.prompt else {}  # a default prompt: encode's own choice
    want = model.encode(TEXTS, normalize_embeddings=True, **asked)
    assert teacher.prompt == family.prompt_text() and (teacher.prompt != "") == (name in PROMPTED)
    assert found.embeddings.shape == want.shape == (len(TEXTS), teacher.sentence_dim)
    np.testing.assert_allclose(found.embeddings, want, atol=1e-5)


PROMPTED = {"bert-cls-prompt", "instructor", "qwen3", "gemma3-dense"}


def test_the_eval_s_onnx_encoder_gives_a_truncated_teacher_s_width(
    stage_one: Callable[[str], tuple[Teacher, list[str], Extraction]],
    teacher_of: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    from staticsem.eval.encoders import TeacherBackendEncoder

    encoder = TeacherBackendEncoder(str(teacher_of("bert-truncated")), "onnx", cache=tmp_path)
    got = encoder.encode(TEXTS)
    assert encoder.info["dim"] == 16 and got.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(got, stage_one("bert-truncated")[2].embeddings, atol=1e-4)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fake topic sentences (few enough that stage 1 chooses them all: KD's drawn short sentences are none)
    and ``TEXTS``."""
    path = write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", 560)
    path.write_text(path.read_text(encoding="utf-8") + "\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


SMALL = (
    "--vocab-size 40 --min-count 2 --sentences-per-word 1000 --pca-sentences 300 --dim 8 --kd-max-steps 20"
)
SMALL += " --kd-eval-every 10 --kd-dev-size 100 --keep-work"


def distil(name: str, teacher: Path, corpus: Path, out: Path) -> dict[str, Any]:
    """``staticsem distill`` (SWE, default backend, small settings) with ``name``'s teacher: the metadata."""
    family = FAMILIES[name]
    args = ["distill", "--teacher", str(teacher), "--out", str(out), "--corpus", str(corpus), *SMALL.split()]
    result = CliRunner().invoke(app, args + (["--prompt", family.prompt] if family.prompt else []))
    assert result.exit_code == 0, result.output
    return dict(json.loads((out / "config.json").read_text(encoding="utf-8"))["metadata"])


def ran_on(name: str) -> tuple[str, str]:
    """The backend and precision the default runs ``name``'s teacher on, on the CPU."""
    return ("torch", "fp32") if name in NOT_EXPORTED else ("onnx-int8", "int8")


@pytest.mark.parametrize("name", NAMES)
def test_a_family_distils_end_to_end_on_the_default_backend(
    name: str,
    teacher_of: Callable[[str], Path],
    corpus: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    meta = distil(name, teacher_of(name), corpus, tmp_path / name)
    backend, precision = ran_on(name)
    assert meta["settings"]["teacher_backend"] == backend
    assert meta["runtime"]["device"] == f"cpu, {backend} {precision}"
    fell_back = [r.getMessage() for r in caplog.records if "cannot export this teacher" in r.getMessage()]
    why = f"({NOT_EXPORTED.get(name)}) to ONNX (RuntimeError: unordered_map::at)"
    line = f"the onnx-int8 teacher backend cannot export this teacher {why}: the teacher runs on torch fp32"
    line += " instead"
    assert fell_back == ([line] if name in NOT_EXPORTED else [])
    family = FAMILIES[name]
    assert meta["settings"]["prompt"] == (family.prompt_text() or None)  # the text read, a default one too
    assert meta["steps"]["kd"]["steps"] > 0 and meta["steps"]["targets"]["short"] == 0
    model = staticsem.load(tmp_path / name)
    assert model.dim == 8 and np.isfinite(model.encode(TEXTS)).all()

    from sentence_transformers import SentenceTransformer

    work = tmp_path / f".{name}.work"
    chosen = json.loads((work / "select.json").read_text(encoding="utf-8"))["sentences"]
    targets = load_file(str(work / "stage1.safetensors"))["embeddings"]
    st = SentenceTransformer(str(teacher_of(name)), device="cpu", local_files_only=True)
    want = st.encode(
        chosen, normalize_embeddings=True, **({"prompt_name": family.prompt} if family.prompt else {})
    )
    # int8 weights: near, not equal; how near one sentence gets depends on the CPU's int8 kernels (qwen3's
    # tiny teacher: min 0.938, mean 0.996 on one 2-core machine, above 0.95 on others)
    cosines = (targets * want).sum(1)
    assert targets.shape == want.shape and cosines.mean() > 0.99 and cosines.min() > 0.9


def test_a_rerun_that_reuses_every_step_records_what_the_teacher_read_and_ran_on(
    teacher_of: Callable[[str], Path], corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default prompt and the fallback to torch come from the record the first run's teacher left."""
    first = distil("gemma3-dense", teacher_of("gemma3-dense"), corpus, tmp_path / "m")

    def unloaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the teacher was loaded although every step was reused")

    monkeypatch.setattr("staticsem.distillation.steps.Teacher", unloaded)
    again = distil("gemma3-dense", teacher_of("gemma3-dense"), corpus, tmp_path / "m")
    assert again["settings"] == first["settings"] and again["runtime"] == first["runtime"]
    assert (first["settings"]["prompt"], first["runtime"]["device"]) == (
        FAMILIES["gemma3-dense"].prompt_text(),
        "cpu, torch fp32",
    )


def test_an_onnx_backend_asked_for_refuses_a_teacher_it_cannot_export_once(
    teacher_of: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = str(teacher_of("gemma3-dense"))
    teacher = Teacher(folder, backend="onnx", cache=tmp_path)  # asked for: no fallback
    assert teacher.backend == "onnx" and teacher.onnx is not None
    with pytest.raises(ExportError) as refused:
        teacher.forward(TEXTS[:2])
    why = "cannot export this teacher (gemma3_text) to ONNX (RuntimeError: unordered_map::at)"
    assert str(refused.value) == f"the onnx teacher backend {why}"

    def traced(*args: object) -> None:
        raise AssertionError("traced again although the cache holds the verdict")

    monkeypatch.setattr(OnnxTransformer, "_export", traced)
    with pytest.raises(ExportError) as again:
        Teacher(folder, backend="onnx", cache=tmp_path).forward(TEXTS[:2])
    assert str(again.value) == str(refused.value)  # the cached verdict, not a second trace
    left = Teacher(folder, backend="onnx", cache=tmp_path, fallback=True)  # left to auto: torch runs it
    assert (left.backend, left.precision, left.onnx) == ("torch", "fp32", None)
    assert torch.equal(left.forward(TEXTS).sentence, Teacher(folder).forward(TEXTS).sentence)


def test_the_token_method_runs_a_teacher_onnx_cannot_export_on_torch(
    teacher_of: Callable[[str], Path], tmp_path: Path
) -> None:
    words = tmp_path / "words.txt"
    words.write_text("cat\ndog\nriver\nmusic\nband\n", encoding="utf-8")
    model = staticsem.distill(
        "token", teacher=str(teacher_of("gemma3-dense")), vocabulary=words, out=tmp_path / "tok", dim=4
    )
    settings = model.metadata["settings"]
    assert (settings["teacher_backend"], settings["teacher_precision"]) == ("torch", "fp32")
    assert model.metadata["runtime"]["device"] == "cpu, torch fp32"


def test_distill_asked_for_onnx_refuses_a_teacher_it_cannot_export_in_one_line(
    teacher_of: Callable[[str], Path], corpus: Path, tmp_path: Path
) -> None:
    """The runtime a build resolves from an explicit ``--teacher-backend onnx-int8`` has no fallback."""
    args = ["distill", "--teacher", str(teacher_of("gemma3-dense")), "--out", str(tmp_path / "m")]
    args += ["--corpus", str(corpus), *SMALL.split(), "--teacher-backend", "onnx-int8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]  # a line of its own
    assert lines == [
        "error: the onnx-int8 teacher backend cannot export this teacher (gemma3_text) to ONNX "
        "(RuntimeError: unordered_map::at)"
    ]
    assert not (tmp_path / "m").exists()


def test_a_prompt_name_that_stands_for_no_text_records_the_empty_text(
    teacher_of: Callable[[str], Path], corpus: Path, tmp_path: Path
) -> None:
    """Qwen3's ``document`` prompt is empty: the build read nothing before each text and says so."""
    args = ["distill", "--teacher", str(teacher_of("qwen3")), "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, [*args, "--corpus", str(corpus), *SMALL.split(), "--prompt", "document"])
    assert result.exit_code == 0, result.output
    metadata = json.loads((tmp_path / "m" / "config.json").read_text(encoding="utf-8"))["metadata"]
    assert metadata["settings"]["prompt"] == ""
