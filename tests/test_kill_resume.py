"""kill -9 in the middle of a checkpoint write, then the same run again, gives the uninterrupted result.

A forked child runs SWE, ASE, X2Static or the token method with the fake teacher; its ``nth`` write of
a chosen checkpoint file stops halfway with SIGKILL (``fakes.kill_inside_write``). The rerun in this
process must finish with the same vectors as an uninterrupted run, redoing only unsaved work.
"""

from __future__ import annotations

import logging
import os
import signal
import traceback
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

import staticsem
from fakes import FakeTeacher, kill_inside_write, write_corpus
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.methods.token.run import distill_token
from staticsem.distillation.methods.x2static.run import X2StaticRun
from test_swe import settings
from test_x2static import x2_settings

TOKEN_WORDS = [
    "the",
    "cat",
    "dog",
    "tax",
    "law",
    "kitten",
    "puppy",
    "money",
    "court",
    "house",
    "tree",
    "bank",
]


def job(kind: str, corpus: Path, out: Path, teacher: FakeTeacher) -> staticsem.StaticModel:
    """Run method ``kind`` into ``out`` (work folder beside it) with fast settings."""
    options = {"teacher": teacher, "show_progress": False, "save_every": 0.0}
    if kind in ("swe", "ase", "swe-kd"):
        stages = {"ase": ("extract",), "swe": ("extract", "pca"), "swe-kd": ("extract", "pca", "kd")}[kind]
        method = "ase" if kind == "ase" else "swe"
        Pipeline(settings(corpus, stages=stages), out, method=method, **options).run(dtype="float32")  # type: ignore[arg-type]
    elif kind == "x2static":
        X2StaticRun(x2_settings(corpus, epochs=1, chunk_sentences=100), out, **options).run(dtype="float32")  # type: ignore[arg-type]
    else:
        work = out.parent / f".{out.name}.work"
        distill_token(teacher, TOKEN_WORDS, dim=8, batch_size=3, work_dir=work, show_progress=False).save(  # type: ignore[arg-type]
            out, dtype="float32"
        )
    return staticsem.load(out)


def killed_child(kind: str, corpus: Path, out: Path, tokenizer: Tokenizer, fragment: str, nth: int) -> int:
    """Run ``job`` in a forked process whose ``nth`` write of a ``fragment`` file ends in SIGKILL."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            kill_inside_write(fragment, nth)
            job(kind, corpus, out, FakeTeacher(tokenizer))
            status = 0
        except BaseException:
            traceback.print_exc()  # shown with the failing test's captured output
        finally:
            os._exit(status)
    return os.waitpid(pid, 0)[1]


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The forked child must use one thread (OpenMP pools do not survive a fork); the tiny runs here are
    faster with one in this process too."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# (method, file name fragment, which write of it is killed, what the rerun must redo with the teacher)
CASES = [
    pytest.param("swe", "stage1-", 2, "some", id="swe-extraction-checkpoint"),
    pytest.param("swe", "select.json", 1, "all", id="swe-step-record"),
    pytest.param("swe-kd", "kd.partial", 3, "none", id="swe-training-state"),
    pytest.param("ase", "stage1-", 3, "some", id="ase-extraction-checkpoint"),
    pytest.param("x2static", "chunk-000001", 1, "some", id="x2static-context-chunk"),
    pytest.param("x2static", "train-", 3, "none", id="x2static-training-state"),
    pytest.param("token", "chunk-000002", 1, "some", id="token-chunk"),
]


@pytest.mark.parametrize(("kind", "fragment", "nth", "redo"), CASES)
def test_kill_inside_a_checkpoint_write_then_resume(
    tmp_path: Path,
    subword_tokenizer: Tokenizer,
    caplog: pytest.LogCaptureFixture,
    kind: str,
    fragment: str,
    nth: int,
    redo: str,
) -> None:
    corpus = write_corpus(tmp_path / "corpus.txt", count=600)
    clean_teacher = FakeTeacher(subword_tokenizer)
    reference = job(kind, corpus, tmp_path / "clean", clean_teacher)
    out = tmp_path / "model"
    status = killed_child(kind, corpus, out, subword_tokenizer, fragment, nth)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL  # it died inside the write
    assert not out.exists()
    teacher = FakeTeacher(subword_tokenizer)
    with caplog.at_level(logging.INFO, logger="staticsem.distillation.stages.training"):
        resumed = job(kind, corpus, out, teacher)
    if kind == "swe-kd":  # training is seeded: a fresh start would end alike, so it must say it resumed
        assert "training resumes at step" in caplog.text
    assert resumed.vocab == reference.vocab
    np.testing.assert_allclose(resumed.vectors, reference.vectors, atol=1e-5)
    done = {"none": 0, "all": clean_teacher.sentences}
    if redo in done:
        assert teacher.sentences == done[redo]
    else:
        assert 0 < teacher.sentences < clean_teacher.sentences
