"""Distilling inside one Python program: import orders with usearch and onnxruntime, and programs run
with ``-c``, from stdin, or as a script without a ``__main__`` guard. Each case runs in a subprocess, so
a segmentation fault fails its test instead of ending the run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from staticsem.distillation.corpus import prefetch
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences

SRC = Path(__file__).parents[1] / "src"
CXX = SRC / "staticsem" / "cxxruntime.py"
LOAD_ORT = "from staticsem.distillation.teachers.onnx import _onnxruntime; _onnxruntime(); print('loaded')"
REFUSE = (
    "from staticsem.errors import StaticsemError\n"
    "try:\n    " + LOAD_ORT + "\nexcept StaticsemError as e:\n    print('refused:', e)"
)
# the module alone (no tokenizers, which sets the C++ locale up as a side effect)
ALONE = (
    f"import importlib.util; spec = importlib.util.spec_from_file_location('cx', {str(CXX)!r}); "
    "cx = importlib.util.module_from_spec(spec); spec.loader.exec_module(cx)"
)


def run(
    code: str, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, *args] if args else [sys.executable, "-c", code]
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )


def has(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_both = pytest.mark.skipif(not has("usearch", "onnxruntime"), reason="needs usearch and onnxruntime")


@needs_both
@pytest.mark.parametrize(
    "code",
    [
        "import staticsem, usearch.index, onnxruntime; print('loaded')",
        "import staticsem; from staticsem.search import Index; import usearch.index; " + LOAD_ORT,
        "import tokenizers, usearch.index, staticsem; " + LOAD_ORT,
        "import torch, usearch.index, staticsem; " + LOAD_ORT,
        "import onnxruntime, usearch.index, staticsem; " + LOAD_ORT,
        # the guard itself, without tokenizers: numpy loads libstdc++, the guard sets its locale up
        f"import numpy; {ALONE}; cx.prepare(); import usearch.index, onnxruntime; print('loaded')",
    ],
)
def test_import_orders_that_work(code: str) -> None:
    result = run(code)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip().endswith("loaded")


@needs_both
@pytest.mark.parametrize(
    "before",
    [
        "import usearch.index",
        "import numpy, usearch.index",
        "from vicinity.backends.usearch import UsearchArgs",
    ],
)
def test_usearch_first_is_refused_in_one_line_before_onnxruntime_loads(before: str) -> None:
    if "vicinity" in before and not has("vicinity"):
        pytest.skip("needs vicinity")
    result = run(f"{before}\nimport staticsem, sys\n{REFUSE}\nprint('onnxruntime' in sys.modules)")
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    refused, loaded = result.stdout.strip().splitlines()
    assert refused.startswith("refused: usearch (or vicinity) was imported before staticsem")
    assert "import staticsem (or tokenizers) before it" in refused and loaded == "False"


@needs_both
def test_the_detector_sees_the_collision_the_crash_needs() -> None:
    """usearch first numbers the shared facet ids; after staticsem (or tokenizers), it finds them numbered."""
    result = run(
        f"import numpy; {ALONE}; a = cx.facets_collide(); import usearch.index; print(a, cx.facets_collide())"
    )
    assert result.returncode == 0 and result.stdout.split() == ["False", "True"], result.stderr[-2000:]
    result = run(f"import staticsem, usearch.index; {ALONE}; print(cx.facets_collide())")
    assert result.returncode == 0 and result.stdout.split() == ["False"], result.stderr[-2000:]


READ = (
    "import staticsem.distillation.corpus.prefetch as p\n"
    "from staticsem.distillation.corpus.reading import CorpusOptions\n"
    "started = []\n"
    "real = p.subprocess.Popen\n"
    "p.subprocess.Popen = lambda *a, **k: started.append(1) or real(*a, **k)\n"
    "sentences = list(p.background_sentences(['c.txt'], CorpusOptions(), chunk=3))\n"
    "print(len(started), len(sentences), sentences[-1])\n"
)


@pytest.fixture()
def corpus_dir(tmp_path: Path) -> Path:
    lines = [f"Sentence number {i} is about cats and dogs." for i in range(40)]
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the reader runs in this process on one core")
@pytest.mark.parametrize("how", ["-c", "stdin", "script"])
def test_the_reader_child_runs_for_programs_from_c_stdin_and_unguarded_scripts(
    corpus_dir: Path, how: str
) -> None:
    if how == "-c":
        result = run(READ, cwd=corpus_dir)
    elif how == "stdin":
        result = run("", "-", stdin=READ, cwd=corpus_dir)
    else:  # no `if __name__ == "__main__"`: a spawned child would re-run it
        (corpus_dir / "prog.py").write_text(READ, encoding="utf-8")
        result = run("", "prog.py", cwd=corpus_dir)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "1 40 Sentence number 39 is about cats and dogs."
    assert "did not start" not in result.stderr


def test_without_a_python_executable_the_corpus_is_read_here(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/usr/bin/blender")  # an embedded interpreter's host
    monkeypatch.setattr(prefetch.subprocess, "Popen", None)  # no child may start
    sources = [str(corpus_dir / "c.txt")]
    assert list(prefetch.background_sentences(sources, CorpusOptions())) == list(iter_sentences(sources))


def test_a_reader_that_cannot_start_falls_back_with_a_warning(
    corpus_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(prefetch, "_BOOT", "import sys; sys.exit(3)")
    sources = [str(corpus_dir / "c.txt")]
    assert list(prefetch.background_sentences(sources, CorpusOptions())) == list(iter_sentences(sources))
    assert "did not start (exit code 3); reading here" in caplog.text
