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
    assert {name for name, _ in SNIPPETS} == {"demo.sh", "setup.sh"}


@pytest.mark.parametrize(("script", "code"), SNIPPETS)
def test_every_inline_python_call_of_the_scripts_runs(script: str, code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (script, done.stderr[-2000:])
