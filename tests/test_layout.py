"""benchmarks/ and studies/: every study keeps the convention of studies/README.md, and every script's own
imports (``_common``, ``teacher_backends``, another script) resolve when it runs from its folder."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("benchmarks", "studies")
FOUR_LINES = ("**Question.**", "**Answer.**", "**Date.**", "**Command.**")


def scripts(folder: str) -> list[Path]:
    return sorted((REPO / folder).glob("*.py"))


def studies() -> list[str]:
    return [p.stem for p in scripts("studies") if not p.stem.startswith("_")]


def test_the_four_studies_moved_out_of_benchmarks() -> None:
    assert {"kd_ceiling", "kd_levers", "teacher_levers", "x2static_scaling"} <= set(studies())
    assert not {p.stem for p in scripts("benchmarks")} & set(studies())


@pytest.mark.parametrize("study", studies())
def test_every_study_has_its_section_index_row_and_results(study: str) -> None:
    readme = (REPO / "studies" / "README.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", readme, flags=re.MULTILINE)
    section = next((s for s in sections if s.startswith(f"{study}.py")), None)
    assert section is not None, f"studies/README.md has no section '## {study}.py'"
    starts = [line.split(" ", 1)[0] for line in section.splitlines() if line.startswith("**")]
    assert starts[:4] == list(FOUR_LINES), f"{study}: the section starts with {starts[:4]}"
    assert re.search(rf"^\| \[?`{study}\.py`", readme, flags=re.MULTILINE), f"{study}: no row in the index"
    results = sorted((REPO / "studies" / "results").glob(f"{study}*.json"))
    assert results, f"{study}: no studies/results/{study}*.json"
    for path in results:
        json.loads(path.read_text(encoding="utf-8"))
        assert f"results/{path.name}" in readme, f"{path.name} is not named in studies/README.md"


def local_imports(path: Path) -> list[str]:
    """Module names the script imports anywhere (functions too) that are scripts of either folder."""
    local = {p.stem for name in FOLDERS for p in scripts(name)}
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(names & local)


SCRIPTS = [p for folder in FOLDERS for p in scripts(folder)]


@pytest.mark.parametrize("script", SCRIPTS, ids=[f"{p.parent.name}/{p.name}" for p in SCRIPTS])
def test_every_script_s_own_imports_resolve_from_its_folder(script: Path) -> None:
    """The script is imported in a fresh process as ``python FOLDER/NAME.py`` would run it (its folder first
    on the path), then every helper or script it imports, also inside functions."""
    code = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(script.parent)!r})\n"
        f"for name in {[script.stem, *local_imports(script)]!r}:\n"
        "    importlib.import_module(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
