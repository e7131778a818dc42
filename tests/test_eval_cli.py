"""Running tasks over several encoders, the report, model loading, and the eval / analyze commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from typer.testing import CliRunner

from fakes import SENTENCES, write_eval_data
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import InputError, ModelFormatError
from staticsem.eval import Encoder, run_tasks
from staticsem.eval.analysis import influence, prepare, sentence_ids
from staticsem.eval.analysis_report import analyze
from staticsem.eval.encoders import Model2VecEncoder, load_encoder
from staticsem.eval.report import write_report
from staticsem.io import export

runner = CliRunner()


class BagEncoder:
    """Counts of a few keywords (a stand-in for a model without word vectors)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        words = ["cat", "dog", "king", "house", "the"]
        return np.array([[t.lower().split().count(w) for w in words] for t in texts], dtype=np.float32)


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    """A miniature of the shared data folder, with every task's layout."""
    return write_eval_data(tmp_path / "data")


def test_run_tasks_reports_every_task_and_is_reproducible(
    tiny_model: StaticModel, data_dir: Path, tmp_path: Path
) -> None:
    encoders: dict[str, Encoder] = {"tiny": tiny_model, "bag": BagEncoder()}
    report = run_tasks(encoders, data_dir, None, show_progress=False)
    assert list(report["tasks"]) == ["wordsim", "analogy", "sts", "classification", "retrieval", "clustering"]
    assert {"scikit-learn", "torch", "onnxruntime"} <= set(report["environment"])  # what the scores rest on
    assert set(report["models"]["tiny"]["results"]) == set(report["tasks"])
    assert "analogy" in report["models"]["bag"]["skipped"]
    files = {f["path"]: f["rows"] for t in report["tasks"].values() for f in t["files"]}
    assert files["sts/stsb-dev.tsv"] == 8 and files["retrieval/toy/corpus.jsonl"] == 8
    assert report["models"]["tiny"]["speed"]["texts"] == len(set(SENTENCES))
    seeded = ["classification", "clustering"]
    again = run_tasks(encoders, data_dir, seeded, speed=False, show_progress=False)
    for name in encoders:
        assert again["models"][name]["results"] == {t: report["models"][name]["results"][t] for t in seeded}

    written = write_report(report, tmp_path / "out" / "report.json", command="staticsem eval ...")
    assert (
        json.loads(written["json"].read_text())["models"]["tiny"]["results"]
        == report["models"]["tiny"]["results"]
    )
    for plot in ("tasks_plot", "speed_plot"):
        assert written[plot].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = written["markdown"].read_text()
    assert "| task | metric | tiny | bag |" in text and "report-tasks.png" in text and "Not measured" in text


def test_run_tasks_rejects_unknown_tasks_and_missing_data(tiny_model: StaticModel, data_dir: Path) -> None:
    with pytest.raises(InputError, match="unknown task 'nope'"):
        run_tasks({"tiny": tiny_model}, data_dir, ["nope"])
    (data_dir / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*.tsv files in"):
        run_tasks({"tiny": tiny_model}, data_dir / "empty", ["wordsim"])


def test_load_encoder_reads_each_kind(saved_model: Path, lower_model: StaticModel, tmp_path: Path) -> None:
    assert isinstance(load_encoder(str(saved_model)), StaticModel)
    folder = export(lower_model, tmp_path / "m2v", "model2vec")
    encoder = load_encoder(str(folder))
    assert isinstance(encoder, Model2VecEncoder)
    texts = ["the cat sat on the mat", "a happy house"]
    np.testing.assert_allclose(encoder.encode(texts), lower_model.encode(texts), atol=1e-5)
    assert encoder.static.vocab == lower_model.vocab
    with pytest.raises(InputError, match="prefix a Sentence Transformer with st:"):
        load_encoder(str(tmp_path / "missing"))
    transformer = tmp_path / "bert"
    transformer.mkdir()
    (transformer / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Transformer"}])
    )
    (transformer / "config.json").write_text("{}")
    with pytest.raises(InputError, match="measure it as st:"):
        load_encoder(str(transformer))


def cli(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_eval_prints_the_table_and_writes_the_report(
    saved_model: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r" / "report.json"
    code, stdout, stderr = cli(
        "eval", saved_model, saved_model, "--data", data_dir, "-t", "sts,wordsim", "-o", out, "--no-progress"
    )
    assert code == 0, stderr
    assert "tiny#2" in stdout and "stsb-dev" in stdout and "wordsim" in stdout
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "report-speed.png",
        "report-tasks.png",
        "report.json",
        "report.md",
    ]
    code, _, stderr = cli("eval", saved_model, "--data", data_dir, "--tasks", "sts,bogus", "-o", out)
    assert code == 2 and stderr.startswith("error: unknown task 'bogus'") and len(stderr.splitlines()) == 1
    code, _, stderr = cli("eval", saved_model, "--data", tmp_path / "nowhere", "-o", out)
    assert code == 2 and "no such folder" in stderr


def test_cli_analyze_fits_components_without_an_analysis_file(
    saved_model: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "analysis"
    code, stdout, stderr = cli(
        "analyze", saved_model, "--data", data_dir, "-o", out, "--components", "2", "--min-sentences", "1"
    )
    assert code == 0, stderr
    assert (
        "fitted here" in stdout and "enwiki_word_freq_min200.tsv" in stdout and "ρ(norm, influence)" in stdout
    )
    assert {p.name for p in out.iterdir()} == {"analysis.json", "summary.md", "components.png", "norms.png"}
    assert len(json.loads((out / "analysis.json").read_text())["components"]) == 2


def test_analyze_uses_the_stored_components(tiny_model: StaticModel, data_dir: Path, tmp_path: Path) -> None:
    folder = tiny_model.save(tmp_path / "swe")
    stage = np.zeros((len(tiny_model), 4), dtype=np.float32)
    stage[tiny_model.vocab.index("king"), 0] = 5.0
    stage[tiny_model.vocab.index("mat"), 0] = -3.0
    counts = np.arange(len(tiny_model), 0, -1).astype(np.float32)
    tensors = {
        "stage1": stage,
        "mean": np.zeros(4, np.float32),
        "components": np.eye(4, dtype=np.float32)[:2],
        "counts": counts,
    }
    save_file(tensors, str(folder / "analysis.safetensors"))
    result = analyze(folder, data_dir, tmp_path / "out", min_sentences=1)
    assert result["sources"]["components"].startswith("analysis.safetensors")
    assert result["components"][0]["top_positive"][0] == ("king", 5.0)
    assert result["components"][0]["top_negative"][0] == ("mat", -3.0)
    save_file({**tensors, "stage1": stage[:3]}, str(folder / "analysis.safetensors"))
    with pytest.raises(ModelFormatError, match="but the model has 18 words"):
        analyze(folder, data_dir, tmp_path / "out")
    # where an SWE distillation leaves it by default: its work folder beside the model
    (folder / "analysis.safetensors").unlink()
    (tmp_path / ".swe.work").mkdir()
    save_file(tensors, str(tmp_path / ".swe.work" / "analysis.safetensors"))
    result = analyze(folder, data_dir, tmp_path / "out", min_sentences=1)
    assert result["components"][0]["top_positive"][0] == ("king", 5.0)


def test_analyze_says_how_to_get_the_analysis_file_of_an_swe_model(
    tiny_model: StaticModel, data_dir: Path, tmp_path: Path
) -> None:
    tiny_model.metadata = {"method": "swe"}
    folder = tiny_model.save(tmp_path / "swe")
    code, stdout, stderr = cli(
        "analyze",
        folder,
        "--data",
        data_dir,
        "-o",
        tmp_path / "out",
        "--components",
        "2",
        "--min-sentences",
        "1",
    )
    assert code == 0, stderr
    assert "fitted here" in stdout and "--keep-analysis" in stdout
    with pytest.raises(
        InputError, match=r"--freq\); or rerun the same `staticsem distill` command with --keep"
    ):
        prepare(tiny_model, SENTENCES, folder=folder)


def test_influence_matches_removing_the_word_and_reencoding(tiny_model: StaticModel) -> None:
    owners, ids = sentence_ids(tiny_model, SENTENCES)
    effect, seen = influence(tiny_model.vectors, owners, ids, len(SENTENCES))
    for word in ("the", "cat", "mat"):
        row = tiny_model.word_index(word)
        changes = []
        for sentence in SENTENCES:
            words = sentence.split()
            if word in words:
                rest = " ".join(w for w in words if w != word)
                changes.append(1 - float(tiny_model.encode(sentence) @ tiny_model.encode(rest)))
        assert seen[row] == len(changes)
        assert effect[row] == pytest.approx(np.mean(changes), abs=1e-5)
    with pytest.raises(InputError, match="give a word frequency file"):
        prepare(tiny_model, SENTENCES)


def test_sentence_transformer_spec_with_a_prompt(tiny_teacher: Path) -> None:
    from staticsem.eval.encoders import display_name

    texts = ["A man plays the guitar.", "A dog runs."]
    plain = load_encoder(f"st:{tiny_teacher}")
    prompted = load_encoder(f"st:{tiny_teacher}#query: ")  # no prompt of that name: the text itself
    expected = plain.model.encode(texts, prompt="query: ", normalize_embeddings=True)  # type: ignore[attr-defined]
    np.testing.assert_allclose(prompted.encode(texts), expected, atol=1e-5)
    assert not np.allclose(prompted.encode(texts), plain.encode(texts), atol=1e-3)
    assert prompted.info["prompt"] == "query: "  # type: ignore[attr-defined]
    assert display_name("st:/models/me5-small#query") == "st:me5-small#query"


def test_sentence_transformer_on_a_teacher_backend(tmp_path: Path, tiny_teacher: Path) -> None:
    texts = ["A man plays the guitar.", "A dog runs.", "Stocks fell sharply on Monday after the report."]
    spec = f"st:{tiny_teacher}"
    torch_rows = load_encoder(spec).encode(texts)
    onnx = load_encoder(spec, "onnx", tmp_path / "onnx")
    np.testing.assert_allclose(onnx.encode(texts), torch_rows, atol=1e-4)  # same model, same pooling
    assert onnx.info["backend"] == "onnx" and onnx.info["dim"] == 32  # type: ignore[attr-defined]
    assert list((tmp_path / "onnx").glob("*.onnx"))  # the export is kept for the next run
    int8 = load_encoder(spec, "onnx-int8", tmp_path / "onnx").encode(texts)
    cosines = (int8 * torch_rows).sum(axis=1)
    assert cosines.min() > 0.97 and not np.allclose(int8, torch_rows, atol=1e-4)
    assert onnx.encode([]).shape == (0, 32)


def test_cli_eval_rejects_an_unknown_backend(saved_model: Path, data_dir: Path, tmp_path: Path) -> None:
    code, _, stderr = cli(
        "eval", saved_model, "--data", data_dir, "--st-backend", "tensorrt", "-o", tmp_path / "r.json"
    )
    assert code == 2 and stderr.startswith("error: unknown teacher backend 'tensorrt'")
    assert not (tmp_path / "r.json").exists()
