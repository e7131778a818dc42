"""``staticsem distill --help`` fits a screen (the everyday options first, in panels by purpose) and
``--help-all`` still documents every option."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from staticsem.cli import app
from staticsem.cli_distill import settings_options
from staticsem.cli_help import CORE, PANELS
from staticsem.distillation import get_method, methods

runner = CliRunner()
MAX_LINES = 120


def helped(*args: str, columns: int = 80) -> str:
    result = runner.invoke(app, ["distill", *args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def panel_rows(text: str) -> dict[str, list[str]]:
    """Each panel's title and the first flag of each of its rows, in order."""
    panels: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines():
        opened = re.match(r"╭─ (.+?) ─", line)
        if opened:
            title = opened.group(1)
            panels[title] = []
            continue
        row = re.match(r"│\s*\*?\s*(--[a-z0-9-]+)", line)
        if row and title:
            panels[title].append(row.group(1))
    return panels


@pytest.mark.parametrize("command", [[], ["swe"]])
def test_the_help_fits_a_screen_the_everyday_options_first(command: list[str]) -> None:
    text = helped(*command, "--help")
    assert len(text.splitlines()) <= MAX_LINES, len(text.splitlines())
    panels = panel_rows(text)
    assert [t for t in panels if t in PANELS] == [p for p in PANELS if p in panels]  # in purpose order
    shown = [flag for rows in panels.values() for flag in rows]
    assert {f"--{flag}" for flag in CORE} <= set(shown)
    for title, rows in panels.items():
        core = [row for row in rows if row[2:] in CORE]
        assert rows[: len(core)] == core, f"{title}: everyday options first, got {rows}"
    assert "--help-all" in shown and "--kd-tau" not in shown  # the rest is one --help-all away


@pytest.mark.parametrize("method", [m.name for m in methods()])
def test_help_all_shows_every_option_whole_on_80_columns(method: str) -> None:
    text = helped(method, "--help-all")
    options = list(settings_options(get_method(method).settings))
    flags = {f"--{o.flag}" for o in options} | {"--out"}
    shown = {flag for rows in panel_rows(text).values() for flag in rows}
    assert flags <= shown, flags - shown
    assert "…" not in text  # no name cut short
    assert all(f"--no-{o.flag}" in text for o in options if o.kind is bool)  # the off switches too


def test_the_method_form_help_all_shows_every_methods_options() -> None:
    text = helped("--help-all", columns=250)
    flags = {f"--{o.flag}" for m in methods() for o in settings_options(m.settings)}
    assert flags <= {flag for rows in panel_rows(text).values() for flag in rows}
