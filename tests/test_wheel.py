"""The package a user gets from ``pip install staticsem``: the sdist and wheel built from the files of a
clean clone (``python -m build``'s PEP 517 build), installed into a fresh venv without extras (PyPI and the
installer's cache give it its dependencies). There the runtime works, the commands that need an extra say
which in one line, and with the ``search`` extra an index builds and searches. One venv serves every test of
this module. Where ``uv`` is installed (``make setup`` installs it) it builds and installs, from the same
metadata, in seconds instead of pip's half minute; else ``build`` and pip do.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from staticsem import StaticModel, load

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = ("staticsem/py.typed", "staticsem/serve/playground.html")
TEXTS = ["the cat sat on the mat", "a dog ran", "the king and the queen", "unhappiness"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "king", "and", "queen", "happy"]
NOT_IN_THE_CORE = ("torch", "sentence_transformers", "usearch", "tantivy", "fastapi", "uvicorn", "sklearn")


def clean_env() -> dict[str, str]:
    """This environment without the test run's source path, so only the installed package is seen."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}


def run(*args: object, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


UV = [sys.executable, "-m", "uv"] if importlib.util.find_spec("uv") else []


def install(venv: Path, requirement: object) -> None:
    """Install ``requirement`` (a wheel, or a wheel with extras) into ``venv`` with its dependencies."""
    if UV:
        run(*UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", requirement)
    else:
        run(venv / "bin" / "python", "-m", "pip", "install", "-q", requirement)


def clone_files() -> list[str]:
    """The files a clean clone holds: tracked ones and new ones git does not ignore."""
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT)
    return [name for name in listed.stdout.split("\0") if name and (ROOT / name).is_file()]


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    source = tmp_path_factory.mktemp("clone")
    for name in clone_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    if UV:  # the sdist, then the wheel from it
        run(*UV, "build", "--quiet", "--out-dir", dist, source)
    else:
        run(sys.executable, "-m", "build", "--outdir", dist, source)
    (sdist,), (wheel,) = dist.glob("*.tar.gz"), dist.glob("*.whl")
    return Built(sdist, wheel)


@dataclass(frozen=True)
class Venv:
    root: Path
    model: Path
    work: Path

    def python(self, code: str, *args: object) -> subprocess.CompletedProcess[str]:
        return run(self.root / "bin" / "python", "-c", code, *args, cwd=self.work)

    def staticsem(self, *args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(self.root / "bin" / "staticsem", *args, cwd=self.work, check=check)


def small_model() -> StaticModel:
    pieces = ["[UNK]", "un", "##happi", "##ness", "happy", "the", "cat"]
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(pieces)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    matrix = np.random.default_rng(3).normal(size=(len(WORDS), 12)).astype(np.float32)
    return StaticModel(WORDS, matrix, tokenizer=tokenizer)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", root)
    install(root, built.wheel)
    work = tmp_path_factory.mktemp("work")
    model = small_model().save(work / "model", dtype="float32")
    (work / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    (work / "docs.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return Venv(root, model, work)


def test_the_sdist_and_wheel_hold_the_package_data(built: Built) -> None:
    names = set(zipfile.ZipFile(built.wheel).namelist())
    assert set(PACKAGE_DATA) <= names and "staticsem/io/hub.py" in names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
    with tarfile.open(built.sdist) as sdist:
        members = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {f"src/{name}" for name in PACKAGE_DATA} <= members and "pyproject.toml" in members


def test_the_wheel_without_extras_loads_and_encodes(venv: Venv) -> None:
    code = """
import importlib.util, json, sys
from pathlib import Path
import numpy as np
import staticsem
model = staticsem.load(sys.argv[1])
np.save("python.npy", model.encode(sys.argv[2:-1]))
print(json.dumps({
    "package": str(Path(staticsem.__file__).parent),
    "similarity": model.similarity(sys.argv[2], sys.argv[3]),
    "present": [name for name in sys.argv[-1].split(",") if importlib.util.find_spec(name)],
}))
"""
    found = json.loads(venv.python(code, venv.model, *TEXTS, ",".join(NOT_IN_THE_CORE)).stdout)
    package = Path(found["package"])
    assert package.is_relative_to(venv.root) and found["present"] == []  # the wheel's copy, no extras
    assert all((package.parent / name).is_file() for name in PACKAGE_DATA)
    ours = load(venv.model)  # the same folder, read by the sources under test
    np.testing.assert_allclose(np.load(venv.work / "python.npy"), ours.encode(TEXTS), atol=1e-6)
    assert found["similarity"] == pytest.approx(ours.similarity(TEXTS[0], TEXTS[1]), abs=1e-6)
    done = venv.staticsem("encode", venv.model, "-i", "texts.txt", "-o", "cli.npy")
    assert "wrote 4 × 12 embeddings" in done.stderr
    np.testing.assert_allclose(np.load(venv.work / "cli.npy"), ours.encode(TEXTS), atol=1e-6)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["distill", "token", "--out", "distilled"], "staticsem[distill]"),
        (["index", "build", "{model}", "docs.txt", "--out", "index"], "staticsem[search]"),
        (["serve", "{model}"], "staticsem[serve]"),
    ],
)
def test_commands_that_need_an_extra_name_it_in_one_line(venv: Venv, args: list[str], extra: str) -> None:
    done = venv.staticsem(*(a.format(model=venv.model) for a in args), check=False)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and extra in done.stderr
    assert not (venv.work / "distilled").exists() and not (venv.work / "index").exists()  # nothing written


def test_with_the_search_extra_an_index_builds_and_searches(venv: Venv, built: Built) -> None:
    install(venv.root, f"staticsem[search] @ {built.wheel.as_uri()}")
    venv.staticsem("index", "build", venv.model, "docs.txt", "--out", "index")
    done = venv.staticsem("search", "index", "the queen and the king", "-k", "1", "--mode", "dense")
    assert "the king and the queen" in done.stdout
    code = """
import sys, staticsem
with staticsem.Index.open(sys.argv[1], read_only=True) as index:
    (hit,) = index.search("a dog ran", k=1, mode="hybrid")
    print(hit.text)
"""
    assert venv.python(code, venv.work / "index").stdout.strip() == "a dog ran"
