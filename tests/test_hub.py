"""Models by Hugging Face hub name: ``staticsem.load("org/name")`` and every CLI MODEL argument.

There is no network here: conftest sets HF_HUB_OFFLINE=1, so ``huggingface_hub.snapshot_download`` (the
same call that downloads when online) resolves names through its own cache lookup. Each test fills a cache
in the layout the library reads (``models--org--name/{blobs,snapshots/<commit>,refs/<branch or tag>}``,
snapshot files linked to their blobs) and points HF_HUB_CACHE at it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import staticsem
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import InputError, ModelFormatError
from staticsem.io import Format, export
from staticsem.io.layout import is_hub_name

runner = CliRunner()
TEXTS = ["the cat sat on the mat", "a happy dog", "the king and the queen"]


@pytest.fixture()
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache as HF_HUB_CACHE (the constant too: huggingface_hub reads it once, at import)."""
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def cache_repo(
    cache: Path, repo_id: str, folder: Path, commit: str, refs: tuple[str, ...] = ("main",)
) -> Path:
    """Put ``folder``'s files in ``cache`` as snapshot ``commit`` of ``repo_id``, named by ``refs``, with
    the commit's file listing (``trees/<commit>.json``) that a download writes beside them."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    listing = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / path.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
        git_blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        listing[path.relative_to(folder).as_posix()] = {"size": len(data), "blob_id": git_blob}
    (repo / "trees").mkdir(exist_ok=True)
    (repo / "trees" / f"{commit}.json").write_text(json.dumps({"format_version": 1, "files": listing}))
    for ref in refs:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def model(seed: int, words: list[str] | None = None) -> StaticModel:
    vocab = words or ["the", "cat", "sat", "on", "mat", "a", "happy", "dog", "king", "and", "queen"]
    matrix = np.random.default_rng(seed).normal(size=(len(vocab), 8)).astype(np.float32)
    return StaticModel(vocab, matrix, metadata={"method": "test", "seed": seed})


def invoke(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("fmt", [Format.STATICSEM, Format.MODEL2VEC, Format.SENTENCE_TRANSFORMERS])
def test_a_hub_name_loads_from_the_cache_as_its_folder_would(
    hub_cache: Path, tmp_path: Path, fmt: Format
) -> None:
    folder = export(model(1), tmp_path / "made", fmt)
    snapshot = cache_repo(hub_cache, "org/tiny", folder, "a" * 40)
    loaded = staticsem.load("org/tiny")
    np.testing.assert_allclose(loaded.encode(TEXTS), staticsem.load(folder).encode(TEXTS), atol=1e-6)
    assert staticsem.io.detect(snapshot) is fmt


def test_a_revision_picks_a_branch_tag_or_commit(hub_cache: Path, tmp_path: Path) -> None:
    old, new = "1" * 40, "2" * 40
    cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "v1"), old, refs=("v1",))
    cache_repo(hub_cache, "org/tiny", model(2).save(tmp_path / "v2"), new, refs=("main",))
    assert staticsem.load("org/tiny").metadata["seed"] == 2
    assert staticsem.load("org/tiny", revision="v1").metadata["seed"] == 1
    assert staticsem.load("org/tiny", revision=old).metadata["seed"] == 1
    with pytest.raises(ModelFormatError, match="at revision 'v9'") as error:
        staticsem.load("org/tiny", revision="v9")
    assert "no such file or folder" in str(error.value) and "Hugging Face cache" in str(error.value)


def test_a_path_that_exists_wins_over_the_hub_name(
    hub_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "cached"), "a" * 40)
    monkeypatch.chdir(tmp_path)
    model(2).save(tmp_path / "org" / "tiny")
    assert staticsem.load("org/tiny").metadata["seed"] == 2
    with pytest.raises(InputError, match="a revision applies to hub names"):
        staticsem.load("org/tiny", revision="main")


def test_a_name_neither_here_nor_cached_is_one_line_naming_both(hub_cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError) as error:
        staticsem.load("org/missing")
    message = str(error.value)
    assert message.startswith("org/missing: no such file or folder, and not in the Hugging Face cache")
    assert str(hub_cache) in message and "HF_HUB_OFFLINE" in message and "\n" not in message
    texts = tmp_path / "in.txt"
    texts.write_text("the cat\n")
    code, _, stderr = invoke("encode", "org/missing", "-i", texts, "-o", tmp_path / "out.npy")
    assert code == 2 and stderr.count("\n") == 1 and "not in the Hugging Face cache" in stderr
    assert not (tmp_path / "out.npy").exists()


def test_paths_that_are_no_hub_names_keep_their_own_error(tmp_path: Path) -> None:
    for missing in (tmp_path / "nowhere", "./org/name", "a/b/c", "name.vec"):
        assert not is_hub_name(missing)
        with pytest.raises(ModelFormatError, match="no such file or folder$"):
            staticsem.load(missing)
    assert is_hub_name("sentence-transformers/static-retrieval-mrl-en-v1") and is_hub_name("o/n.v1")
    assert not any(map(is_hub_name, ("org/-x", "org/x--y", "org/x..y", "/org/name", "org/name/")))


def test_without_huggingface_hub_a_hub_name_names_the_extra(
    hub_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_model: Path
) -> None:
    cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "cached"), "a" * 40)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import huggingface_hub now fails
    with pytest.raises(ModelFormatError, match=r"org/tiny: no such file or folder; .*staticsem\[hub\]"):
        staticsem.load("org/tiny")
    code, _, stderr = invoke("similarity", "org/tiny", "a cat", "a dog")
    assert code == 2 and stderr.count("\n") == 1 and "pip install 'staticsem[hub]'" in stderr
    assert staticsem.load(saved_model).dim == 16  # local folders need no hub
    code, _, stderr = invoke("push", saved_model, "org/tiny")
    assert code == 2 and stderr.count("\n") == 1 and "pip install 'staticsem[hub]'" in stderr


def test_cli_model_arguments_take_hub_names_and_revisions(hub_cache: Path, tmp_path: Path) -> None:
    cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "v1"), "1" * 40, refs=("v1",))
    cache_repo(hub_cache, "org/tiny", model(2).save(tmp_path / "v2"), "2" * 40, refs=("main",))
    first, second = model(1), model(2)
    for revision, expected in ((["--revision", "v1"], first), ([], second)):
        code, stdout, stderr = invoke("similarity", "org/tiny", "the cat", "a dog", *revision)
        assert code == 0, stderr
        assert float(stdout) == pytest.approx(expected.similarity("the cat", "a dog"), abs=1e-3)
    texts = tmp_path / "in.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    code, _, stderr = invoke("encode", "org/tiny", "-i", texts, "-o", tmp_path / "v.npy", "--revision", "v1")
    assert code == 0, stderr
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), first.encode(TEXTS), atol=2e-3)  # float16
    code, stdout, stderr = invoke("info", "org/tiny")
    assert code == 0 and "staticsem" in stdout and "words" in stdout, stderr
    code, _, stderr = invoke("convert", "org/tiny", tmp_path / "m.vec", "--to", "fasttext")
    assert code == 0 and staticsem.load(tmp_path / "m.vec").vocab == second.vocab, stderr
    code, _, stderr = invoke("neighbors", "org/tiny", "cat", "-k", "2", "--revision", "nope")
    assert code == 2 and stderr.count("\n") == 1 and "at revision 'nope'" in stderr
    from staticsem.eval.encoders import load_encoder  # what staticsem eval measures

    np.testing.assert_allclose(load_encoder("org/tiny").encode(TEXTS), second.encode(TEXTS), atol=2e-3)


def test_index_build_records_the_cached_folder(hub_cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("usearch")
    snapshot = cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "v1"), "1" * 40)
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(TEXTS) + "\n")
    code, _, stderr = invoke("index", "build", "org/tiny", docs, "--out", tmp_path / "idx")
    assert code == 0, stderr
    code, stdout, stderr = invoke("search", tmp_path / "idx", "queen", "-k", "1")
    assert code == 0 and "king" in stdout, stderr
    from staticsem.search import Index

    with Index.open(tmp_path / "idx", read_only=True) as index:
        assert index.config["model"]["path"] == str(snapshot.resolve())
    with Index.build("org/tiny", TEXTS, tmp_path / "api-idx") as index:  # the API takes hub names too
        assert index.config["model"]["path"] == str(snapshot.resolve())


def test_index_build_and_train_classifier_take_a_revision(hub_cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("usearch")
    pytest.importorskip("torch")
    from staticsem.search import Index
    from staticsem.train import StaticClassifier

    old = cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "v1"), "1" * 40, refs=("v1",))
    cache_repo(hub_cache, "org/tiny", model(2).save(tmp_path / "v2"), "2" * 40, refs=("main",))
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(TEXTS) + "\n")
    code, _, stderr = invoke(
        "index", "build", "org/tiny", docs, "--out", tmp_path / "idx", "--revision", "v1"
    )
    assert code == 0, stderr
    with Index.open(tmp_path / "idx", read_only=True) as index:
        assert index.config["model"]["path"] == str(old.resolve())
    train = tmp_path / "train.tsv"
    train.write_text(
        "".join(f"{label}\t{text}\n" for label, text in [("pet", "the cat"), ("royal", "a king")] * 4)
    )
    out = tmp_path / "clf"
    code, _, stderr = invoke(
        "train-classifier", "org/tiny", "--revision", "v1", "--train", train, "--out", out,
        "--freeze", "--epochs", 1, "--no-progress",
    )  # fmt: skip
    assert code == 0, stderr
    assert StaticClassifier.load(out).model.metadata["seed"] == 1  # the v1 snapshot's table


def test_serve_takes_a_hub_name_and_answers_with_it(hub_cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    import httpx

    from servers import running

    cache_repo(hub_cache, "org/tiny", model(1).save(tmp_path / "v1"), "1" * 40, refs=("v1",))
    with running(["org/tiny", "--revision", "v1"], env={"HF_HUB_CACHE": str(hub_cache)}) as server:
        info = httpx.get(f"{server.url}/info", timeout=10).json()
        vector = httpx.post(f"{server.url}/v1/embeddings", json={"input": "the cat"}, timeout=10).json()
    assert info["model"] == "org/tiny@v1" and info["metadata"]["seed"] == 1
    np.testing.assert_allclose(vector["data"][0]["embedding"], model(1).encode("the cat"), atol=2e-3)
