"""Shared fixtures: a tiny WordPiece tokenizer and a small random model, built without network."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub: it reads HF_HUB_OFFLINE once, at import time, so a
# monkeypatch.setenv inside a test comes too late. Tests never reach the hub.
os.environ["HF_HUB_OFFLINE"] = "1"
# The suite runs a process per core, each with torch's (OpenMP's) threads, one per core: threads that wait
# spinning take the core from the other processes. Waiting threads sleep instead (before torch loads; the
# subprocesses and Ray workers the tests start inherit it). Measured on 2 cores, -n 2: test_crosslingual,
# test_swe and test_training took 123.5 s spinning and 64.1 s sleeping.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from staticsem import StaticModel
from staticsem.pieces import PieceTable

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "ran",
    "a",
    "house",
    "happy",
    "un",
    "king",
    "queen",
    "man",
    "woman",
    "Paris",
    "paris",
    "france",
]
PIECES = [
    "[UNK]",
    "the",
    "cat",
    "un",
    "##happi",
    "##ness",
    "happy",
    "house",
    "##s",
    "dog",
    "##gy",
    "z",
    "##z",
]


# ``make test`` runs the tests on every core (pytest-xdist, ``-n``). These modules run whole, in order, in
# one process: a module fixture too costly to make twice (the wheel and its venv, the teachers' ONNX
# exports, a browser) or one Ray cluster at a time (``RayScale("auto")`` joins whichever runs). The docs'
# examples run a page at a time in one process (a page's blocks share a namespace and folder; the pages
# spread over the processes, each of which makes the demo model once). Every other test goes wherever a
# process is free.
ONE_PROCESS = (
    "test_scale.py",
    "test_serve_browser.py",
    "test_teacher_backends.py",
    "test_wheel.py",
)
BY_PAGE = "test_docs.py"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's per-test load scheduling, but each module of ``ONE_PROCESS`` is one unit of work (its
    ``xdist_group`` marker cannot do this since pytest 9 keeps node ids to itself)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneProcessModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if Path(module).name == BY_PAGE:  # test_docs_example[docs/usage.md:74:bash]: the page's unit
                return f"{module}::{nodeid.partition('[')[2].split(':', 1)[0]}"
            return module if Path(module).name in ONE_PROCESS else nodeid

    return OneProcessModules(config, log)


@pytest.fixture(scope="session")
def subword_tokenizer() -> Tokenizer:
    """A tiny lower-casing WordPiece tokenizer (like BERT's) for the unknown-word fallback."""
    tok = Tokenizer(models.WordPiece({p: i for i, p in enumerate(PIECES)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


@pytest.fixture()
def tiny_model(subword_tokenizer: Tokenizer) -> StaticModel:
    """Random 16-d vectors for ``WORDS`` with the subword tokenizer attached."""
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(len(WORDS), 16)).astype(np.float32)
    return StaticModel(WORDS, matrix, tokenizer=subword_tokenizer, metadata={"method": "test"})


# texts whose unknown words have several pieces (un ##happi ##ness, house ##s, dog ##gy): the modes of
# ``modes_model`` encode them differently; texts of known words only encode alike in every mode
MODE_TEXTS = ["the cat unhappiness", "houses of the king", "a doggy ran on the mat", "the queen and houses"]


@pytest.fixture()
def modes_model(tiny_model: StaticModel) -> StaticModel:
    """``tiny_model`` with learned pieces at weight 0.5, encoding queries at weight 1 and documents at 0."""
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(len(PIECES), tiny_model.dim)).astype(np.float32)
    pieces = PieceTable(rows, tiny_model.tokenizer, 0.5)  # type: ignore[arg-type]
    model = tiny_model.with_pieces(pieces)
    return model.with_modes(query={"piece_weight": 1.0}, document={"piece_weight": 0.0})


@pytest.fixture()
def lower_model() -> StaticModel:
    """A lower-case vocabulary without tokenizer (what exports reproduce exactly)."""
    words = [w for w in WORDS if w == w.lower()]
    rng = np.random.default_rng(11)
    return StaticModel(words, rng.normal(size=(len(words), 12)).astype(np.float32))


@pytest.fixture()
def saved_model(tiny_model: StaticModel, tmp_path: Path) -> Path:
    """``tiny_model`` saved in staticsem's folder format."""
    return tiny_model.save(tmp_path / "tiny")


@pytest.fixture(scope="session")
def tiny_teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny real teacher (``fakes.build_tiny_teacher``: 2 layers, 32 wide) as a Sentence Transformer folder,
    for the tests that check plumbing with a real ``Teacher`` (the claims about the packaged MiniLM itself
    keep it). Built once for every test process of the run (a lock in their shared temporary folder)."""
    import fcntl

    from fakes import build_tiny_teacher

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # every worker of this run
    folder = shared / "tiny-teacher"
    with (shared / "tiny-teacher.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "teacher" / "modules.json").is_file():
            build_tiny_teacher(folder)
    return folder / "teacher"


# texts whose words make phrases of ``phrase_model``: "the cat", "happy dog", "paris france", "the king"
PHRASE_TEXTS = ["the cat sat on the mat", "a happy dog ran", "Paris france", "the king, the queen", "zzz"]


@pytest.fixture()
def phrase_model(tiny_model: StaticModel) -> StaticModel:
    """``tiny_model`` with phrase rows counted in place of their words (``staticsem.phrases``)."""
    phrases = ["the cat", "happy dog", "paris france", "the king"]
    rows = np.random.default_rng(11).normal(size=(len(phrases), tiny_model.dim)).astype(np.float32)
    vocab = [*tiny_model.vocab, *phrases]
    return StaticModel(
        vocab, np.vstack([tiny_model.vectors, rows]), tokenizer=tiny_model.tokenizer, phrases="replace"
    )
