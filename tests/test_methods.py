"""The method contract and registry: settings are the single source of options, the CLI is made from them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from staticsem.cli import app
from staticsem.distillation import get_method, methods, register_method
from staticsem.distillation.api import make_settings
from staticsem.errors import InputError


def test_registry_holds_every_method_once() -> None:
    names = [m.name for m in methods()]
    assert names[0] == "swe" and len(names) == len(set(names))
    assert {"swe", "ase", "x2static", "token", "word2vec", "fasttext", "glove"} <= set(names)
    with pytest.raises(InputError, match="unknown method 'nope'; choose one of swe"):
        get_method("nope")
    with pytest.raises(ValueError, match="registered already"):
        register_method(dataclasses.replace(get_method("glove"), summary="another"))


@pytest.mark.parametrize("method", [m.name for m in methods()])
def test_every_setting_has_help_a_default_and_a_validation(method: str) -> None:
    settings = get_method(method).settings
    for field in dataclasses.fields(settings):
        assert field.metadata.get("help"), f"{method}: {field.name} has no help text"
    settings().validate()  # every field has a default, and the defaults are valid


def test_each_sub_command_shows_its_own_options() -> None:
    runner = CliRunner()
    swe = runner.invoke(app, ["distill", "swe", "--help-all"], env={"COLUMNS": "200"}).output
    glove = runner.invoke(app, ["distill", "glove", "--help-all"], env={"COLUMNS": "200"}).output
    assert "--kd-tau" in swe and "--kd-groups" in swe and "--window" not in swe
    assert "--window" in glove and "--x-max" in glove and "--kd-tau" not in glove
    assert "--ray" in swe and "--ray" not in glove  # only methods that scale run on Ray


@pytest.mark.parametrize("form", [[], ["--method"]])
def test_a_default_that_differs_between_methods_stays_each_methods(
    form: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # SWE aims at 7 sentences a word, ASE (whose vectors are the contexts' mean alone) at 10
    import staticsem.cli_distill as cli_distill

    built: dict[str, Any] = {}

    def capture(name: str, values: dict[str, Any], frame: dict[str, Any]) -> None:
        built[name] = make_settings(get_method(name), values)

    monkeypatch.setattr(cli_distill, "run", capture)
    runner = CliRunner()
    for name in ("swe", "ase"):
        result = runner.invoke(app, ["distill", *form, name, "--out", "unused"])
        assert result.exit_code == 0, result.output
    assert built["swe"].sentences_per_word == 7 and built["ase"].sentences_per_word == 10
    # each method given a number explicitly, the other method's default among them, keeps it
    for name, count in (("ase", "4"), ("ase", "7"), ("swe", "10")):
        given = runner.invoke(app, ["distill", *form, name, "--sentences-per-word", count, "--out", "x"])
        assert given.exit_code == 0 and built[name].sentences_per_word == int(count), (name, count)


def test_settings_from_keywords_record_lists_as_tuples_and_refuse_strangers() -> None:
    settings = make_settings(get_method("swe"), {"corpus": ["a.txt", "b.txt"], "stages": ["extract"]})
    assert settings.corpus == ("a.txt", "b.txt") and settings.stages == ("extract",)
    with pytest.raises(InputError, match="unknown glove options: layer .*layer: ase and swe"):
        make_settings(get_method("glove"), {"layer": 2})


def test_importing_staticsem_imports_no_method_and_no_torch() -> None:
    code = (
        "import sys, staticsem; "
        "bad = [m for m in sys.modules if m.startswith('torch') or m.startswith('staticsem.distillation')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
