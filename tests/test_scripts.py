"""The README's two commands run shell scripts (``scripts/``) that call Python inline; a module moved in the
package must not turn one of those calls into an ImportError the script reads as "no" (the demo then fell
back to another method without saying why)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
SNIPPETS = [
    (path.name, code)
    for path in sorted(SCRIPTS.glob("*.sh"))
    for code in re.findall(r'python -c "([^"]+)"', path.read_text(encoding="utf-8"))
]


def test_the_scripts_call_python_inline() -> None:
    assert {name for name, _ in SNIPPETS} == {"setup.sh"}  # demo.sh runs demo.py, whose imports fail loudly


@pytest.mark.parametrize(("script", "code"), SNIPPETS)
def test_every_inline_python_call_of_the_scripts_runs(script: str, code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (script, done.stderr[-2000:])


@pytest.mark.slow  # a tiny SWE build with the tiny real teacher (seconds)
def test_the_demo_runs_its_commands_here_and_says_what_it_shrank(
    tiny_teacher: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakes import write_corpus

    monkeypatch.syspath_prepend(str(SCRIPTS))
    import demo

    corpus = write_corpus(tmp_path / "corpus.txt", count=600)
    options = ["--corpus", str(corpus), "--teacher", str(tiny_teacher), "--vocab-size", "40"]
    options += ["--min-count", "2", "--dim", "8", "--stages", "extract,pca", "--teacher-backend", "torch"]
    model = str(tmp_path / "demo")
    demo.build(model, options)
    demo.show(model, words=("cat", "music"), analogy=("cat", "kitten", "dog"))
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if line.startswith("$ staticsem ")]
    assert [c.split()[2] for c in commands] == ["distill", "info", "neighbors", "neighbors", "analogy"]
    assert "Sentence similarities" in out and "│ steps " in out
    said = re.search(r"The demo shrank the full recipe \(its defaults in brackets\): (.+)\.\n", out)
    assert said is not None, out
    shrunk = [part.split(" (")[0] for part in said.group(1).split("), ")]  # what it says it changed
    assert sorted(part.split()[0] for part in shrunk) == sorted(flag[2:] for flag in options[::2])


@pytest.mark.parametrize(
    ("argv", "embedded", "first"),
    [
        (["m"], True, ["distill", "swe", "--out", "m", "SMALL"]),  # make demo: the small recipe
        (["m"], False, ["distill", "token", "--out", "m"]),  # no embedded corpus: the token method
        (["m", "--", "--corpus", "c.txt"], False, ["distill", "swe", "--out", "m", "--corpus", "c.txt"]),
    ],
)
def test_the_demo_builds_then_shows_on_every_path(
    argv: list[str], embedded: bool, first: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import demo

    from staticsem.distillation.corpus import embedded as corpus

    done: list[list[str]] = []
    monkeypatch.setattr(demo, "SMALL", ["SMALL"])
    monkeypatch.setattr(corpus, "available", lambda: embedded)
    monkeypatch.setattr(demo, "staticsem", lambda *args: done.append(list(args)))
    monkeypatch.setattr(demo, "shrunk", lambda model, options: done.append(["shrunk", model, *options]) or "")
    monkeypatch.setattr(demo, "show", lambda model, *rest: done.append(["show", model]))
    demo.main(argv)
    assert done[0] == first
    assert done[-1] == ["show", "m"]  # what the model does, after whichever build
    assert (done[1][0] == "shrunk") == (first[1] == "swe")


def test_the_demo_names_options_given_with_an_equals_sign_or_switched_off(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(SCRIPTS))
    import demo
    import numpy as np

    from staticsem import StaticModel
    from staticsem.distillation.method import record
    from staticsem.distillation.methods.swe.settings import SWESettings

    settings = record(SWESettings(vocab_size=500, check_tokenizer=False, dim=64))
    StaticModel(["a"], np.ones((1, 2), np.float32), metadata={"method": "swe", "settings": settings}).save(
        tmp_path / "m"
    )
    said = demo.shrunk(str(tmp_path / "m"), ["--vocab-size=500", "--no-check-tokenizer", "--dim", "64"])
    assert "vocab-size 500" in said and "check-tokenizer" in said and "dim 64" in said
