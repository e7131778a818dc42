"""A build with edit families: its distillation's defaults (``KDSettings.resolved``) and the search rows
(``--search-rows``), a second table distilled as a build without edits, for the search modes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.cli import app
from staticsem.distillation.corpus.edits import EditSettings
from staticsem.distillation.methods.swe.pipeline import Pipeline
from staticsem.distillation.methods.swe.search_step import with_training
from staticsem.distillation.stages.kd_settings import FAMILY_TRAINING, PLAIN_TRAINING, KDSettings
from staticsem.errors import InputError
from staticsem.io import load
from staticsem.quantize import DType, quantize

TEXTS = ["the cat and the dog", "a judge of the court", "rain on the lake", "the band is in the song"]
# the KD key of `tiny_swe(kd_short=120)` without edits in the code before these defaults (a5c5b99)
KD_KEY_PLAIN = "5049d13c2d588c33"
FAMILY_KEYS = tuple(FAMILY_TRAINING)


def build(folder: Path, teacher: FakeTeacher, **changes: object) -> Pipeline:
    settings = tiny_swe(folder.parent / "corpus.txt", kd_short=120, **changes)
    pipeline = Pipeline(settings, folder, teacher=teacher, show_progress=False, save_every=0.0)  # type: ignore[arg-type]
    pipeline.run("float16")
    return pipeline


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory, subword_tokenizer: Tokenizer) -> dict[str, Pipeline]:
    """A build with 30 edit families (and the defaults they bring), the same build without edits, and with
    edits and the settings of a build without them asked for."""
    root = tmp_path_factory.mktemp("search-rows")
    write_corpus(root / "corpus.txt")
    plain = replace(tiny_swe(root / "corpus.txt").kd, **PLAIN_TRAINING)
    made = {
        name: build(root / name, FakeTeacher(subword_tokenizer), edit=EditSettings(sentences=edits))
        for name, edits in (("edits", 30), ("plain", 0))
    }
    asked = build(root / "asked", FakeTeacher(subword_tokenizer), edit=EditSettings(sentences=30), kd=plain)
    return {**made, "asked": asked}


@pytest.fixture(scope="module")
def subword_tokenizer() -> Tokenizer:
    from conftest import subword_tokenizer as make

    return make.__wrapped__()  # type: ignore[attr-defined]


def test_the_search_rows_are_the_table_a_build_without_edits_distils(builds: dict[str, Pipeline]) -> None:
    edits, plain = builds["edits"], builds["plain"]
    assert plain.keys["kd"] == KD_KEY_PLAIN and "search" not in plain.keys  # builds of before: as they were
    assert edits.keys["search"] == KD_KEY_PLAIN != edits.keys["kd"]
    table = load(plain.work.folder / "stage3")
    searched = load(edits.work.folder / "stage3-search")
    np.testing.assert_array_equal(searched.vectors, table.vectors)
    assert table.pieces is not None and searched.pieces is not None
    np.testing.assert_array_equal(searched.pieces.vectors, table.pieces.vectors)
    model = staticsem.load(edits.out)
    rows = model.row_sets["search"]
    assert rows.vectors.dtype == np.int8 and rows.scales is not None and rows.pieces is not None
    stored, scales = quantize(table.vectors, DType.INT8)
    np.testing.assert_array_equal(rows.vectors, stored)
    np.testing.assert_allclose(rows.scales, scales)  # type: ignore[arg-type]
    np.testing.assert_allclose(rows.pieces, table.pieces.vectors, atol=2e-2)
    assert {mode: settings.rows for mode, settings in model.modes.items()} == {
        "query": "search",
        "document": "search",
    }
    kept = staticsem.load(plain.out)
    assert not kept.row_sets and all(settings.rows is None for settings in kept.modes.values())
    # encode keeps the distilled table; the modes encode as the build without edits does
    own = load(edits.work.folder / "stage3")
    np.testing.assert_allclose(model.vectors, own.vectors, atol=1e-3)
    for a, b in zip(model.encode_query(TEXTS), kept.encode_query(TEXTS), strict=True):
        assert float(a @ b) > 0.999
    assert not np.allclose(model.encode(TEXTS), model.encode_query(TEXTS), atol=1e-3)


def test_a_build_with_edit_families_trains_with_the_family_settings(builds: dict[str, Pipeline]) -> None:
    edits, plain = builds["edits"], builds["plain"]
    assert {k: getattr(edits.settings.kd, k) for k in FAMILY_KEYS} == FAMILY_TRAINING
    assert {k: getattr(plain.settings.kd, k) for k in FAMILY_KEYS} == PLAIN_TRAINING
    recorded = json.loads((edits.out / "config.json").read_text())["metadata"]["settings"]
    assert {k: recorded["kd"][k] for k in FAMILY_KEYS} == FAMILY_TRAINING and recorded["search_rows"] is True
    asked = builds["asked"]  # set settings are kept: the same families, trained as without them
    assert {k: getattr(asked.settings.kd, k) for k in FAMILY_KEYS} == PLAIN_TRAINING
    assert asked.keys["edits"] == edits.keys["edits"] and asked.keys["kd"] != edits.keys["kd"]
    trained, default = (load(p.work.folder / "stage3").vectors for p in (asked, edits))
    assert not np.allclose(trained, default, atol=1e-4)


def test_set_settings_are_kept_and_unset_ones_follow_the_families() -> None:
    assert KDSettings().resolved(True) == KDSettings(**FAMILY_TRAINING)
    assert KDSettings().resolved(False) == KDSettings(**PLAIN_TRAINING)
    asked = KDSettings(whole=0.0, patience=3)
    # the whole-batch loss turned off leaves no pairs of families to rank
    assert asked.resolved(True) == KDSettings(
        **{**FAMILY_TRAINING, "whole": 0.0, "patience": 3, "whole_pairs": "all"}
    )
    unset = KDSettings()  # training without the pipeline reads unset settings as without families
    assert (unset.whole_weight, unset.pairs_ranked, unset.groups, unset.stale_limit) == tuple(
        PLAIN_TRAINING.values()
    )


@pytest.mark.parametrize(
    ("changes", "search"),
    [
        ({"edit": EditSettings(sentences=5)}, True),
        ({"edit": EditSettings(sentences=0)}, False),
        ({"edit": EditSettings(sentences=5), "search_rows": False}, False),
        ({"edit": EditSettings(sentences=0), "search_rows": True}, True),
        ({"edit": EditSettings(), "kd_short": 0}, False),  # no short sentences: no edits
        ({"edit": EditSettings(sentences=5), "pairs": ("p.tsv",)}, False),
        ({"edit": EditSettings(), "corpus": ("en=a.txt", "de=b.txt")}, False),
        ({"edit": EditSettings(sentences=5), "objective": "both", "parallel": ("p.tsv",)}, False),
        ({"edit": EditSettings(sentences=5), "stages": ("extract", "pca")}, False),
    ],
)
def test_search_rows_come_by_default_with_edit_families_alone(changes: dict, search: bool) -> None:
    settings = with_training(replace(tiny_swe(Path("corpus.txt"), kd_short=120), **changes))
    assert settings.search_rows is search


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pairs": ("PAIRS",)}, "--search-rows and --pairs both give the search modes rows"),
        ({"stages": ("extract", "pca")}, "--search-rows distils a second table: it needs the kd stage"),
        ({"corpus": ("en=CORPUS", "de=CORPUS")}, "--search-rows needs a build of one language"),
    ],
)
def test_search_rows_asked_where_they_cannot_be_made_get_one_line(
    tmp_path: Path, changes: dict, message: str
) -> None:
    corpus, pairs = write_corpus(tmp_path / "corpus.txt"), tmp_path / "pairs.tsv"
    pairs.write_text("a question\ta passage\n", encoding="utf-8")
    paths = {"CORPUS": str(corpus), "PAIRS": str(pairs)}
    changes = {
        key: tuple(v.replace("CORPUS", paths["CORPUS"]).replace("PAIRS", paths["PAIRS"]) for v in value)
        if isinstance(value, tuple)
        else value
        for key, value in changes.items()
    }
    with pytest.raises(InputError, match=message):
        replace(tiny_swe(corpus, search_rows=True), **changes).validate()


def test_edits_that_make_no_family_train_as_a_build_without_them(
    tmp_path: Path, subword_tokenizer: Tokenizer
) -> None:
    # negations only, in a corpus of sentences without "not" and with "is"/"was" nowhere: no copy at all
    words = ["cat", "dog", "lake", "song", "the", "rain", "court", "band", "fish", "bank", "drum", "fur"]
    lines = [" ".join(np.random.default_rng(i).choice(words, 6, replace=False)) for i in range(600)]
    (tmp_path / "corpus.txt").write_text("\n".join(f"{line}." for line in lines) + "\n", encoding="utf-8")
    pipeline = build(tmp_path / "model", FakeTeacher(subword_tokenizer), edit=EditSettings(kinds="negate"))
    assert pipeline.records["edits"]["edited"] == 0 and pipeline.settings.kd.pairs_ranked == "families"
    plain = build(tmp_path / "plain", FakeTeacher(subword_tokenizer), edit=EditSettings(sentences=0))
    trained, without = (load(p.work.folder / "stage3").vectors for p in (pipeline, plain))
    np.testing.assert_array_equal(trained, without)  # the same table as a build without edits
    # ... and no second copy of it for the search modes (one that was asked for is made)
    assert "search" not in pipeline.records and not staticsem.load(pipeline.out).row_sets
    asked = build(
        tmp_path / "asked", FakeTeacher(subword_tokenizer), edit=EditSettings(sentences=0), search_rows=True
    )
    assert "search" in asked.records and set(staticsem.load(asked.out).row_sets) == {"search"}


def test_the_command_line_has_the_switch_and_refuses_a_bad_pair_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_corpus(tmp_path / "corpus.txt")
    (tmp_path / "pairs.tsv").write_text("a question\ta passage\n", encoding="utf-8")
    args = ["distill", "--corpus", str(corpus), "--out", str(tmp_path / "m")]
    result = CliRunner().invoke(app, [*args, "--search-rows", "--pairs", str(tmp_path / "pairs.tsv")])
    assert result.exit_code == 2 and "--search-rows and --pairs both give" in result.output
    assert not (tmp_path / "m").exists() and not (tmp_path / ".m.work").exists()
    import staticsem.cli_distill as cli_distill

    ran: list[dict[str, object]] = []
    monkeypatch.setattr(cli_distill, "run", lambda name, values, frame: ran.append(values))
    for switch, value in (("--search-rows", True), ("--no-search-rows", False), (None, None)):
        assert CliRunner().invoke(app, [*args, *([switch] if switch else [])]).exit_code == 0
        assert ran.pop().get("search_rows") is value
    help_text = CliRunner().invoke(app, ["distill", "--help-all"]).output
    assert "(off: --no-search-rows)" in " ".join(help_text.replace("│", " ").split())


def test_unset_settings_check_as_without_families() -> None:
    with pytest.raises(InputError, match="--kd-patience must be at least 1, got 0"):
        replace(KDSettings(), patience=0).validate()
    KDSettings().validate()


def test_the_defaults_of_a_build_with_families_pass_its_checks_and_opt_outs_too(tmp_path: Path) -> None:
    corpus, pairs = write_corpus(tmp_path / "corpus.txt"), tmp_path / "pairs.tsv"
    pairs.write_text("a man plays\ta person plays\n" * 20, encoding="utf-8")
    edits = {"kd_short": 120, "edit": EditSettings(sentences=5)}
    kd = tiny_swe(corpus).kd
    for changes in (
        {},
        {"kd": replace(kd, whole=0.0)},  # the whole-batch loss off alone: no pairs of families to rank
        {"kd": replace(kd, whole=0.0, group_share=0.0, patience=5)},  # the distillation of before
        {"kd": replace(kd, whole_pairs="families")},  # the default, given
        {"objective": "both", "parallel": (str(pairs),)},
    ):
        settings = tiny_swe(corpus, **edits, **changes)
        settings.validate()  # what the command line checks first
        resolved = with_training(settings)
        resolved.validate()  # and the build again, with the defaults chosen
        assert resolved.kd.pairs_ranked == ("all" if resolved.kd.whole_weight == 0 else "families")
    assert KDSettings(whole=0.0).resolved(True).whole_pairs == "all"
    with pytest.raises(InputError, match="--edit-share and --kd-groups fill more than a batch"):
        tiny_swe(corpus, **{**edits, "edit": EditSettings(sentences=5, share=0.6)}).validate()


def test_a_study_run_names_the_settings_unset_by_default() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "studies"))
    from _benchmarks import parse_run

    assert parse_run("patience=10+group_share=1.0+whole=0.5+whole_pairs=families", {}) == {
        "patience": 10,
        "group_share": 1.0,
        "whole": 0.5,
        "whole_pairs": "families",
    }
