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


# a few flags and the panel their purpose puts them in, pinned by hand
PURPOSES = {
    "--corpus": "The corpus",
    "--exclude": "The corpus",
    "--sentences-per-word": "The corpus",
    "--teacher": "The teacher",
    "--device": "The teacher",
    "--prompt": "The teacher",
    "--teacher-backend": "The teacher",
    "--out": "The model",
    "--vocab-size": "The model",
    "--dim": "The model",
    "--phrases": "The model",
    "--phrase-mode": "The model",
    "--languages": "Languages",
    "--hand-over": "Languages",
    "--pairs": "Search modes and pairs",
    "--search-piece-weight": "Search modes and pairs",
    "--kd-lr": "Training",
    "--kd-tau": "Training",
    "--pairs-lr": "Search modes and pairs",
    "--objective": "Training",
    "--workers": "Resources",
    "--ray": "Resources",
    "--batch-size": "Resources",
}


def test_each_option_sits_in_the_panel_of_its_purpose() -> None:
    panels = panel_rows(helped("swe", "--help-all", columns=250))
    where = {flag: title for title, rows in panels.items() for flag in rows}
    assert {flag: where.get(flag) for flag in PURPOSES} == PURPOSES


def command_options(method: str) -> dict[str, object]:
    """Every option of ``staticsem distill METHOD`` (settings and frame alike) by its first flag."""
    import typer.main

    group = typer.main.get_command(app).commands["distill"]  # type: ignore[attr-defined]
    found = {}
    for parameter in group.commands[method].params:
        names = [n for n in parameter.opts if n.startswith("--")]
        if names and names[0] not in ("--help", "--help-all"):
            found[names[0]] = parameter
    return found


@pytest.mark.parametrize("method", [m.name for m in methods()])
def test_every_option_of_every_method_is_in_help_all_with_its_help(method: str) -> None:
    text = helped(method, "--help-all", columns=250)
    shown = {flag for rows in panel_rows(text).values() for flag in rows}
    options = command_options(method)
    assert {"--dtype", "--keep-work", "--license", "--out"} <= set(options)
    assert set(options) <= shown, set(options) - shown
    assert all(getattr(p, "help", None) for p in options.values())


@pytest.mark.parametrize("method", [m.name for m in methods()])
def test_every_methods_help_fits_a_screen(method: str) -> None:
    assert len(helped(method, "--help").splitlines()) <= MAX_LINES


@pytest.mark.parametrize("method", [m.name for m in methods()])
def test_every_setting_still_reaches_its_method_from_the_command_line(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import staticsem.cli_distill as cli_distill

    ran: list[dict[str, object]] = []
    monkeypatch.setattr(cli_distill, "run", lambda name, values, frame: ran.append(values))
    given, wanted = [], {}
    for option in settings_options(get_method(method).settings):  # every setting at once, off its default
        base = str(getattr(option.kind, "__origin__", option.kind))
        if option.kind is bool or option.kind == bool | None:  # a switch (None: the settings choose)
            given.append(f"--no-{option.flag}" if option.default else f"--{option.flag}")
            wanted[option.flag] = not option.default
        elif "float" in str(option.kind):
            given += [f"--{option.flag}", "0.25"]
            wanted[option.flag] = 0.25
        elif "int" in str(option.kind) and "str" not in base:
            given += [f"--{option.flag}", "7"]
            wanted[option.flag] = 7
        else:  # texts, lists and comma lists: digits, which every such option takes
            given += [f"--{option.flag}", "7,8"]
    result = runner.invoke(app, ["distill", method, *given, "--out", "m"])
    assert result.exit_code == 0, result.output
    (got,) = ran
    for option in settings_options(get_method(method).settings):
        value = got[option.path[0]] if option.group is None else getattr(got[option.path[0]], option.path[1])
        if option.flag in wanted:
            assert value == wanted[option.flag], option.flag
        else:
            assert value in ("7,8", ("7,8",), ("7", "8"), (7, 8)), (option.flag, value)
