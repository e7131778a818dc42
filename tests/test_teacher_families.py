"""Teacher families (``families.py``: BERT mean, CLS with an instruction prompt and INSTRUCTOR's pooling,
one saved with ``truncate_dim``; XLM-R Unigram, MPNet, ModernBERT, Qwen3, Gemma 3 text with Dense modules):
stage 1's word vectors are the teacher's token states recomputed sentence by sentence; its targets are
sentence-transformers' own ``encode`` with the same prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from families import FAMILIES, TEXTS, build_family
from staticsem.distillation.stages.extract import Extraction, extract
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.text import word_pattern

NAMES = list(FAMILIES)


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
