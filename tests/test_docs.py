"""The docs site builds strictly, and every Python and shell example of the docs runs (docs/development.md).

Each page's examples run in order in a fresh copy of one folder holding ``models/demo``, a small model the
token method distils from the packaged teacher (no network), and the files the examples name. A failure
names the page, the line of its block and the language; a skipped block shows its reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from docs_examples import REPO, RUN, Block, blocks, pages, vocabulary, write_sandbox

PAGES = pages()
BLOCKS = [block for page in PAGES for block in blocks(page)[0] if block.language in RUN]
TIMEOUT = 300  # seconds a shell block may take


def test_mkdocs_builds_the_site_strictly(tmp_path: Path) -> None:
    """Warnings fail the build: a broken link, a missing page or include, an API name that is gone."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),  # Material's banner about MkDocs 2, not about us
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    for page in ("index.html", "recipes/index.html", "studies/index.html", "reference/staticsem/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    reference = (tmp_path / "site" / "reference" / "staticsem" / "index.html").read_text(encoding="utf-8")
    assert "most_similar" in reference  # the API reference is generated from the docstrings


def test_every_block_names_its_language_and_every_marker_its_block_and_reason() -> None:
    problems = [problem for page in PAGES for problem in blocks(page)[1]]
    assert not problems, "\n".join(problems)


def test_the_docs_hold_examples_of_both_kinds_that_run() -> None:
    running = {(b.page, b.language) for b in BLOCKS if b.skip is None}
    assert {language for _, language in running} == set(RUN)
    assert {"README.md", "docs/usage.md", "docs/search.md"} <= {page for page, _ in running}


WORDS = {10: "ten"}  # numbers the pages spell out


def _flat(page: str) -> str:
    """A page's text with every run of white space as one space (phrases may wrap)."""
    return " ".join((REPO / page).read_text(encoding="utf-8").split())


def test_the_defaults_distillation_md_gives_in_brackets_are_the_methods_own() -> None:
    """`` `--flag` (VALUE) `` in a method's section of docs/distillation.md states that method's default."""
    from staticsem.cli_distill import settings_options
    from staticsem.distillation import get_method

    stated = 0
    for section in (REPO / "docs/distillation.md").read_text(encoding="utf-8").split("\n## `")[1:]:
        defaults = {o.flag: o.default for o in settings_options(get_method(section.split("`")[0]).settings)}
        for flag, value in re.findall(r"`--([a-z0-9-]+)` \(([0-9][0-9,.e-]*)[;)]", section):
            assert float(value.replace(",", "")) == defaults[flag], f"--{flag} ({value})"
            stated += 1
    assert stated >= 10


def test_the_defaults_the_pages_state_are_todays() -> None:
    """Each phrase is made from the code's default: a changed default fails here until its page says so."""
    from staticsem.distillation.methods.swe.settings import (
        SHORT_DEFAULT_MAX,
        SHORT_PER_CHOSEN,
        SHORT_WORDS,
        ASESettings,
        SWESettings,
    )
    from staticsem.distillation.stages.kd_settings import KDSettings
    from staticsem.search import HnswSettings
    from staticsem.search.fusion import FusionSettings
    from staticsem.search.vectors import DEFAULT_DTYPE
    from staticsem.serve.settings import Limits
    from staticsem.train.fit import FitSettings

    swe, ase, kd, hnsw, fusion, limits, fit = (
        SWESettings(),
        ASESettings(),
        KDSettings(),
        HnswSettings(),
        FusionSettings(),
        Limits(),
        FitSettings(),
    )
    short = f"{SHORT_PER_CHOSEN:g} per sentence stage 1 chose, at most {SHORT_DEFAULT_MAX:,}"
    phrases = {
        "docs/distillation.md": [
            f"`--sentences-per-word` ({swe.sentences_per_word}; ASE's {ase.sentences_per_word})",
            f"(τ = {kd.tau:g}), Adam {kd.lr:.0e}, batch {kd.batch_size},".replace("e-0", "e-"),
            f"{SHORT_PER_CHOSEN:g} random short corpus sentences per chosen one (at most "
            f"{SHORT_DEFAULT_MAX:,}; {SHORT_WORDS[0]}–{SHORT_WORDS[1]} words",
            f"in `encode` ({swe.pieces_weight():g}, the default;",
            f"`swe --stages extract --sentences-per-word {ase.sentences_per_word} --layer -1`",
        ],
        "docs/recipes.md": [
            f"rank {swe.rare_after // 1000}k), N = {swe.sentences_per_word}, {swe.dim} d, {swe.fallback}",
            f"`--kd-short N` (default: {short}):",
            f"`--kd-tau` sets the loss temperature ({kd.tau:g})",
            f"a sentence and its {kd.group_size - 1} nearest by teacher embedding",
        ],
        "docs/usage.md": [f"piece weight: {swe.pieces_weight():g} with SWE's defaults"],
        "docs/search.md": [
            f"`--dtype` {DEFAULT_DTYPE} by default",
            f"`--exact-threshold` vectors ({hnsw.exact_threshold:,})",
            f"(connectivity {hnsw.connectivity}, expansion {hnsw.expansion_add} on add and "
            f"{hnsw.expansion_search} on search",
            f"(`convex`, the default: {fusion.dense_weight:g} dense + {fusion.bm25_weight:g} BM25)",
            f"`w / ({fusion.rrf_k:g} + rank)`",
            f"the graphs at expansion {hnsw.hybrid_expansion} (`HnswSettings.hybrid_expansion`)",
            f"fewer than {hnsw.flush_size:,} vectors",
            f"merged {WORDS.get(hnsw.merge_factor)} at a time up to {hnsw.merge_max:,} vectors",
        ],
        "docs/serving.md": [
            f"`--max-inputs` {limits.max_inputs:,} texts",
            f"`--max-chars` {limits.max_chars:,} characters",
            f"`--max-body-bytes` {limits.max_body_bytes // 2**20} MiB",
            f"`--max-k` {limits.max_k:,}, `--max-matrix-cells` {limits.max_matrix_cells:,}.",
            f"`--max-in-flight` requests ({limits.max_in_flight})",
        ],
        "docs/classifiers.md": [
            f"one ReLU layer of {fit.hidden} units with dropout {fit.dropout:g} by default",
            f"`--patience` ({fit.patience})",
            f"a stratified {fit.dev_fraction:.0%} of `--train`".replace("%", " %"),
        ],
    }
    missing = [
        (page, phrase) for page, some in phrases.items() for phrase in some if phrase not in _flat(page)
    ]
    assert not missing, "\n".join(f"{page}: {phrase!r}" for page, phrase in missing)


@pytest.fixture(scope="module")
def demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo-sized model: the token method over the sandbox's words, from the packaged teacher."""
    import staticsem

    folder = tmp_path_factory.mktemp("demo")
    words = folder / "words.txt"
    words.write_text("\n".join(vocabulary()) + "\n", encoding="utf-8")
    model = staticsem.distill(
        "token", vocabulary=str(words), dim=32, teacher_backend="torch", show_progress=False
    )
    return model.save(folder / "model")


@pytest.fixture(scope="module")
def page_folder(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A fresh copy of the sandbox for each page, the same one for every block of that page."""
    base = write_sandbox(tmp_path_factory.mktemp("sandbox"), demo_model)
    folders: dict[str, Path] = {}

    def folder(page: str) -> Path:
        if page not in folders:
            folders[page] = tmp_path_factory.mktemp(page.replace("/", "-").replace(".", "-"))
            shutil.copytree(base, folders[page], dirs_exist_ok=True)
        return folders[page]

    return folder


NAMESPACES: dict[str, dict[str, Any]] = {}  # the Python blocks of one page share their names


@pytest.mark.slow  # the demo model comes from the real packaged teacher
@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_docs_example(
    block: Block, page_folder: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.skip is not None:
        pytest.skip(f"docs-test: {block.skip}")
    folder = page_folder(block.page)
    monkeypatch.chdir(folder)
    if block.language == "python":
        namespace = NAMESPACES.setdefault(block.page, {"__name__": "__docs__"})
        exec(compile(block.code, f"{block.page}:{block.line}", "exec"), namespace)
        return
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=folder,
        env=_shell_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, (
        f"{block.name}: exit {done.returncode}\n{block.code}\nstdout:\n{done.stdout[-2000:]}\n"
        f"stderr:\n{done.stderr[-3000:]}"
    )


def _shell_env() -> dict[str, str]:
    """This interpreter's ``python`` and ``staticsem`` first on the PATH; the sources this test imports."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", COLUMNS="100")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return env
