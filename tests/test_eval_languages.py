"""Evaluation in many languages: each set's language from its file name, msts / xsts / bitext per language,
``--languages``, and the markdown report's per-language tables (checked against the report's numbers)."""

from __future__ import annotations

import copy
import itertools
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr
from typer.testing import CliRunner

from fakes import word_vector, write_eval_data, write_multilingual_data, write_rows
from staticsem.cli import app
from staticsem.errors import InputError
from staticsem.eval import TASK_NAMES, run_tasks
from staticsem.eval.bitext import BitextRetrieval
from staticsem.eval.languages import codes, language_of, parse_languages
from staticsem.eval.report import markdown
from staticsem.eval.sts import STS, CrossLingualSTS, MultilingualSTS


class WordEncoder:
    """The sum of fixed random word vectors; another ``salt`` is another model."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([sum(word_vector(self.salt + w, 8) for w in t.split()) for t in texts])


def spearman_of(encoder: WordEncoder, path: Path) -> float:
    """STS Spearman ×100 of ``encoder`` on one file, computed here."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    a, b = encoder.encode([r[1] for r in rows]), encoder.encode([r[2] for r in rows])
    cosines = np.einsum("ij,ij->i", a, b) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return float(100 * spearmanr([float(r[0]) for r in rows], cosines).statistic)


@pytest.mark.parametrize(
    ("stem", "language"),
    [
        ("stsb-de-dev", "de"),
        ("stsb-en-de-dev", "de"),
        ("stsb-dev-en-de", "de"),
        ("tatoeba-laser-deu-eng", "de"),
        ("tatoeba-laser-cmn-eng", "zh"),
        ("stsb-de-fr-dev", "de-fr"),
        ("stsb-en-dev", "en"),
        ("stsb-dev", None),
        ("sickr-trial", None),
    ],
)
def test_a_set_s_language_comes_from_its_file_name(stem: str, language: str | None) -> None:
    assert language_of(stem) == language
    assert language_of(stem, "en") == (language or "en")


def test_languages_option_values() -> None:
    assert codes("tatoeba-laser-deu-eng") == ["de", "en"]
    assert parse_languages(["de,FR", " de "]) == ("de", "fr")
    assert (
        parse_languages([]) is None and parse_languages(None) is None and parse_languages(["de,all"]) is None
    )
    with pytest.raises(InputError, match="german: not a two-letter language code"):
        parse_languages(["de,german"])


def test_msts_xsts_and_bitext_read_their_sets_with_languages(tmp_path: Path) -> None:
    data = write_multilingual_data(tmp_path)
    old = tmp_path / "xsts" / "stsb-dev-en-de.tsv"  # issue 6's layout, still read by xsts
    write_rows(old, ["4\tthe dog\tdeedog", "1\tthe dog\tdecat", "2\tcat\tdedog"])
    msts, xsts = MultilingualSTS(data), CrossLingualSTS(data)
    assert msts.datasets == ["stsb-de-dev", "stsb-fr-dev"]  # not the en-X files beside them
    assert msts.languages == {"stsb-de-dev": "de", "stsb-fr-dev": "fr"}
    assert xsts.datasets == ["stsb-dev-en-de", "stsb-en-de-dev", "stsb-en-fr-dev"]  # not the monolingual
    assert set(xsts.languages.values()) == {"de", "fr"} and xsts.languages["stsb-dev-en-de"] == "de"
    encoder = WordEncoder()
    folder = data / "multilingual" / "sts"
    for task, paths in ((msts, folder.glob("stsb-??-dev.tsv")), (xsts, [old, *folder.glob("stsb-en-*")])):
        metrics = task(encoder)
        expected = {path.stem: spearman_of(encoder, path) for path in paths}
        assert {stem: metrics[stem] for stem in expected} == pytest.approx(expected)
        assert metrics["mean"] == pytest.approx(np.mean(list(expected.values())))
    french = MultilingualSTS(data, languages=("fr",))
    assert french.datasets == ["stsb-fr-dev"] and len(french.files) == 1
    assert CrossLingualSTS(data, languages=("de",)).datasets == ["stsb-dev-en-de", "stsb-en-de-dev"]
    with pytest.raises(InputError, match="msts: no set in sv"):
        MultilingualSTS(data, languages=("sv",))
    bitext = BitextRetrieval(data)
    assert bitext.languages == {"tatoeba-laser-deu-eng": "de", "tatoeba-laser-fra-eng": "fr"}
    assert BitextRetrieval(data, languages=("fr",)).datasets == ["tatoeba-laser-fra-eng"]
    write_rows(tmp_path / "sts" / "stsb-dev.tsv", ["1\ta\tb", "2\ta\tc"])
    write_rows(tmp_path / "sts" / "stsb-nl-dev.tsv", ["1\ta\tb", "2\ta\tc"])
    assert STS(data).languages == {"stsb-dev": "en", "stsb-nl-dev": "nl"}  # English unless named


def test_languages_pick_the_sets_and_the_english_tasks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = write_multilingual_data(write_eval_data(tmp_path / "data"))
    encoders = {"w": WordEncoder()}

    def run(tasks: list[str] | None, languages: tuple[str, ...] | None) -> dict[str, Any]:
        return run_tasks(encoders, data, tasks, languages=languages, speed=False, show_progress=False)

    assert list(run(None, None)["tasks"]) == list(TASK_NAMES) and TASK_NAMES[-2:] == ("xsts", "msts")
    with caplog.at_level(logging.WARNING):
        german = run(None, ("de", "sv"))
    assert list(german["tasks"]) == ["bitext", "xsts", "msts"] and german["languages"] == ["de", "sv"]
    assert {lang for t in german["tasks"].values() for lang in t["languages"].values()} == {"de"}
    assert "no evaluation set in sv" in caplog.text
    both = run(None, ("en", "fr"))
    assert list(both["tasks"]) == list(TASK_NAMES) and both["tasks"]["bitext"]["datasets"] == [
        "tatoeba-laser-fra-eng"
    ]
    with pytest.raises(InputError, match="wordsim: its sets are English; add en"):
        run(["wordsim"], ("de",))


def table(text: str, heading: str) -> list[list[str]]:
    """The rows (cells without bold) of the first markdown table after ``heading``."""
    lines = text.split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [[cell.strip().replace("**", "") for cell in row.strip("|").split("|")] for row in rows[2:]]


@pytest.fixture()
def multilingual_report(tmp_path: Path) -> dict[str, Any]:
    """Two models on English STS and two languages, German with two monolingual sets."""
    data = write_multilingual_data(write_eval_data(tmp_path / "data"))
    german = data / "multilingual" / "sts" / "stsb-de-dev.tsv"
    rows = german.read_text(encoding="utf-8").splitlines()
    write_rows(
        german.with_name("stsb-de-test.tsv"),
        [f"{i % 5}\t{r.split(chr(9), 1)[1]}" for i, r in enumerate(rows)],
    )
    encoders = {"a": WordEncoder(), "b": WordEncoder("salt")}
    tasks = ["sts", "bitext", "xsts", "msts"]
    return run_tasks(encoders, data, tasks, speed=False, show_progress=False)


def test_the_report_has_one_table_per_language_and_means_over_languages(
    multilingual_report: dict[str, Any],
) -> None:
    report = multilingual_report
    a, b = (report["models"][name]["results"] for name in ("a", "b"))
    text = markdown(report, {})
    assert (
        text.index("## Scores") < text.index("## Per language") < text.index("### en") < text.index("### de")
    )
    assert table(text, "### de") == [
        ["msts", "stsb-de-dev", f"{a['msts']['stsb-de-dev']:.2f}", f"{b['msts']['stsb-de-dev']:.2f}"],
        ["msts", "stsb-de-test", f"{a['msts']['stsb-de-test']:.2f}", f"{b['msts']['stsb-de-test']:.2f}"],
        [
            "msts",
            "mean",
            *(f"{(r['msts']['stsb-de-dev'] + r['msts']['stsb-de-test']) / 2:.2f}" for r in (a, b)),
        ],
        [
            "xsts",
            "stsb-en-de-dev",
            f"{a['xsts']['stsb-en-de-dev']:.2f}",
            f"{b['xsts']['stsb-en-de-dev']:.2f}",
        ],
        ["bitext", "tatoeba-laser-deu-eng", *(f"{r['bitext']['tatoeba-laser-deu-eng']:.2f}" for r in (a, b))],
    ]
    assert [row[:2] for row in table(text, "### en")] == [
        ["sts", "stsb-dev"],
        ["sts", "sickr-trial"],
        ["sts", "mean"],
    ]
    assert [row[1] for row in table(text, "### fr")] == [
        "stsb-fr-dev",
        "stsb-en-fr-dev",
        "tatoeba-laser-fra-eng",
    ]
    summary = {row[0]: row for row in table(text, "## Per language (×100)")}
    assert summary["msts"][2] == "2: de fr" and summary["sts"][2] == "en" and summary["xsts"][2] == "2: de fr"
    msts = a["msts"]
    over_languages = ((msts["stsb-de-dev"] + msts["stsb-de-test"]) / 2 + msts["stsb-fr-dev"]) / 2
    assert f"{over_languages:.2f}" != f"{msts['mean']:.2f}"  # the mean over sets would be another number
    assert summary["msts"][3] == f"{over_languages:.2f}"
    assert summary["xsts"][4] == f"{b['xsts']['mean']:.2f}"  # one set per language: the task mean
    missing = copy.deepcopy(report)
    del missing["models"]["b"]["results"]["msts"]["stsb-fr-dev"]
    assert table(markdown(missing, {}), "## Per language (×100)")[1][4] == "—"


def test_an_english_report_has_no_per_language_tables(multilingual_report: dict[str, Any]) -> None:
    english = copy.deepcopy(multilingual_report)
    for task in ("xsts", "msts"):
        del english["tasks"][task]
    assert "## Per language" not in markdown(english, {}) and "### de" not in markdown(english, {})


def test_cli_eval_with_languages(saved_model: Path, tmp_path: Path) -> None:
    data = write_multilingual_data(tmp_path / "data")
    out = tmp_path / "r" / "report.json"
    args = ["eval", str(saved_model), "--data", str(data), "-o", str(out), "--no-progress", "--no-plots"]
    result = CliRunner().invoke(app, [*args, "--languages", "de", "--tasks", "msts,xsts,bitext"])
    assert result.exit_code == 0, result.stderr
    text = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "languages de." in text and "### de" in text and "### fr" not in text
    result = CliRunner().invoke(app, [*args, "--languages", "de,german"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --languages: german: not a two-letter")
    assert len(result.stderr.splitlines()) == 1


def test_a_set_of_two_languages_is_measured_only_when_both_are_asked_for(tmp_path: Path) -> None:
    """A de–fr set belongs to German and French: --languages de alone leaves it out."""
    pairs = ["3.0\tzwei Hunde\tdeux chiens", "1.0\tein Haus\tun chat"]
    write_rows(tmp_path / "xsts" / "stsb-de-fr-dev.tsv", pairs)
    write_rows(tmp_path / "xsts" / "stsb-en-de-dev.tsv", pairs)
    assert list(CrossLingualSTS(tmp_path, languages=("de", "fr")).pairs) == [
        "stsb-de-fr-dev",
        "stsb-en-de-dev",
    ]
    assert list(CrossLingualSTS(tmp_path, languages=("de",)).pairs) == ["stsb-en-de-dev"]
    with pytest.raises(InputError, match="xsts: no set in fr among"):
        CrossLingualSTS(tmp_path, languages=("fr",), files=["stsb-en-de-dev.tsv"])


@pytest.mark.parametrize("asked", [("de",), ("de", "en"), ("de", "en", "fr")])
def test_a_set_whose_file_names_no_language_is_left_out_when_languages_are_given(
    tmp_path: Path, asked: tuple[str, ...]
) -> None:
    """A cross-lingual STS or bitext set named without a language code belongs to no language: every set
    is measured without ``--languages``; with it, that set is left out, English asked for or not (an STS
    set named so is English, the ``sts`` task's default, and stays when English is asked for)."""
    data = write_multilingual_data(write_eval_data(tmp_path / "data"))
    write_rows(data / "xsts" / "mixed-pairs.tsv", ["4\tthe dog\tdedog", "1\tthe dog\tdecat", "2\tcat\tdedog"])
    write_rows(data / "parallel" / "news-commentary.tsv", ["the dog\tdedog", "a cat\tdecat", "rain\tderain"])
    assert "mixed-pairs" in CrossLingualSTS(data).datasets
    assert "news-commentary" in BitextRetrieval(data).datasets
    assert CrossLingualSTS(data, languages=asked).datasets == [
        f"stsb-en-{lang}-dev" for lang in ("de", "fr") if lang in asked
    ]
    assert BitextRetrieval(data, languages=asked).datasets == [
        f"tatoeba-laser-{code}-eng" for lang, code in (("de", "deu"), ("fr", "fra")) if lang in asked
    ]
    tasks = ["xsts", "bitext", *(["sts"] if "en" in asked else [])]
    report = run_tasks({"w": WordEncoder()}, data, tasks, languages=asked, speed=False, show_progress=False)
    measured = {stem for task in report["tasks"].values() for stem in task["datasets"]}
    assert not {"mixed-pairs", "news-commentary"} & measured
    assert ("stsb-dev" in measured) == ("en" in asked)
    assert set(report["models"]["w"]["results"]["xsts"]) == {*report["tasks"]["xsts"]["datasets"], "mean"}
