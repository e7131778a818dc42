"""Classifiers: fit (fine-tuned, frozen), what training changes, save/load, bad labels, CLI, /classify."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import staticsem
from staticsem import StaticModel
from staticsem.cli import app
from staticsem.errors import InputError
from staticsem.serve import Limits, ServeSettings, create_app
from staticsem.serve.app import app_from_settings
from staticsem.train import StaticClassifier, is_classifier
from staticsem.train.fit import FitSettings

ANIMAL = ["cat", "dog", "mat", "sat", "house"]
ROYAL = ["king", "queen", "man", "woman", "paris"]
FILLER = ["the", "a", "on"]
FAST = {"epochs": 8, "batch_size": 16, "lr": 0.01, "table_lr": 0.01, "show_progress": False}


def make_examples(count: int, seed: int) -> tuple[list[str], list[str]]:
    """Texts of three topic words and two filler words; the label is the topic."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(count):
        label = ("animal", "royal")[i % 2]
        words = list(rng.choice(ANIMAL if label == "animal" else ROYAL, 3)) + list(rng.choice(FILLER, 2))
        texts.append(" ".join(rng.permutation(words)))
        labels.append(label)
    return texts, labels


TRAIN = make_examples(160, 1)
DEV = make_examples(40, 2)
TEST = make_examples(60, 3)


@pytest.fixture(scope="module")
def tuned(request: pytest.FixtureRequest) -> StaticClassifier:
    model = _tiny()
    return StaticClassifier.fit(*TRAIN, model, dev=DEV, **FAST)


def _tiny() -> StaticModel:
    from conftest import WORDS

    rng = np.random.default_rng(7)
    return StaticModel(
        WORDS, rng.normal(size=(len(WORDS), 16)).astype(np.float32), metadata={"method": "test"}
    )


# ---------------------------------------------------------------- fitting
@pytest.mark.parametrize("options", [{}, {"freeze": True}, {"hidden": 8}, {"class_weights": True}])
def test_fit_learns_a_separable_task(options: dict) -> None:
    classifier = StaticClassifier.fit(*TRAIN, _tiny(), dev=DEV, **FAST, **options)
    assert classifier.evaluate(*TEST)["accuracy"] >= 95.0
    assert classifier.classes == ["animal", "royal"]
    assert len(classifier.head.weights) == (2 if FitSettings(**options).hidden else 1)


def test_the_dev_score_of_training_is_the_numpy_score(tuned: StaticClassifier) -> None:
    """Training (torch) and prediction (numpy) compute the same thing: the best dev accuracy recorded
    during training is what ``evaluate`` measures on the dev set after training."""
    assert tuned.metadata["best_dev"] == pytest.approx(tuned.evaluate(*DEV)["accuracy"], abs=1e-6)


def test_fine_tuning_moves_only_the_rows_of_the_training_texts(tuned: StaticClassifier) -> None:
    base = _tiny()
    used = {base.word_index(w) for w in ANIMAL + ROYAL + FILLER}
    moved = {i for i in range(len(base)) if not np.allclose(tuned.model.vectors[i], base.vectors[i])}
    assert moved and moved <= used
    assert base.word_index("france") not in moved


def test_fine_tuning_leaves_the_rows_of_words_only_in_dev_texts() -> None:
    """Dev texts are scored, never trained on: the rows of words found only there (which the compact table
    holds) keep their vectors exactly."""
    dev_only = ["ran", "happy", "france"]
    base = _tiny()
    assert not set(dev_only) & {w for text in TRAIN[0] for w in text.split()}
    dev = ([f"{text} {' '.join(dev_only)}" for text in DEV[0]], DEV[1])
    classifier = StaticClassifier.fit(*TRAIN, base, dev=dev, **FAST)
    rows = [base.word_index(word) for word in dev_only]
    np.testing.assert_array_equal(classifier.model.vectors[rows], base.vectors[rows])
    assert not np.allclose(
        classifier.model.vectors[base.word_index("cat")], base.vectors[base.word_index("cat")]
    )


def test_freezing_keeps_the_table() -> None:
    base = _tiny()
    classifier = StaticClassifier.fit(*TRAIN, base, freeze=True, **FAST)
    assert classifier.model is base


def test_dev_split_without_a_dev_set() -> None:
    classifier = StaticClassifier.fit(*TRAIN, _tiny(), dev_fraction=0.25, **FAST)
    assert classifier.metadata["dev_examples"] == 40 and classifier.metadata["train_examples"] == 120


def multi_label_examples() -> tuple[list[str], list[list[str]]]:
    """``TRAIN`` with a second label, ``filler``, on the texts holding "the"."""
    labels = [
        [label] + (["filler"] if "the" in text.split() else []) for text, label in zip(*TRAIN, strict=True)
    ]
    return TRAIN[0], labels


def test_multi_label() -> None:
    texts, labels = multi_label_examples()
    classifier = StaticClassifier.fit(texts, labels, _tiny(), multi_label=True, **{**FAST, "epochs": 30})
    assert classifier.classes == ["animal", "filler", "royal"]
    predicted = classifier.predict(texts)
    assert all(isinstance(p, list) for p in predicted)
    assert predicted == [p.label for p in classifier.classify(texts)]
    assert classifier.evaluate(texts, labels)["micro_f1"] >= 90.0


# ---------------------------------------------------------------- persistence
def test_save_load_predicts_the_same(tuned: StaticClassifier, tmp_path: Path) -> None:
    folder = tuned.save(tmp_path / "clf")
    assert is_classifier(folder)
    again = StaticClassifier.load(folder)
    texts = TEST[0] + ["", "zzz unknown words"]
    assert np.array_equal(again.predict_proba(texts), tuned.predict_proba(texts))
    assert again.predict(texts) == tuned.predict(texts) and again.classes == tuned.classes
    assert again.predict(texts) == [p.label for p in again.classify(texts)]
    table = staticsem.load(folder)  # the fine-tuned table is a staticsem model again
    np.testing.assert_array_equal(table.encode(texts), tuned.model.encode(texts))
    assert not any(p.suffix in {".pkl", ".pickle", ".bin"} for p in folder.iterdir())


def test_a_saved_multi_label_classifier_keeps_its_threshold(tmp_path: Path) -> None:
    from dataclasses import replace

    classifier = StaticClassifier.fit(
        *multi_label_examples(), _tiny(), multi_label=True, threshold=0.2, **FAST
    )
    texts = [*TEST[0], "the a on", "cat king"]  # the last two: a class between 0.2 and 0.5
    assert classifier.predict(texts) != replace(classifier, threshold=0.5).predict(texts)
    again = StaticClassifier.load(classifier.save(tmp_path / "clf"))
    assert again.threshold == 0.2 and again.predict(texts) == classifier.predict(texts)


def test_predicting_needs_no_torch(tuned: StaticClassifier, tmp_path: Path) -> None:
    folder = tuned.save(tmp_path / "clf")
    code = (
        "import sys; from staticsem.train import StaticClassifier; "
        f"c = StaticClassifier.load({str(folder)!r}); print(c.predict(['the cat sat'])[0]); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "animal"


def test_a_corrupt_head_is_refused(tuned: StaticClassifier, tmp_path: Path) -> None:
    folder = tuned.save(tmp_path / "clf")
    config = json.loads((folder / "classifier.json").read_text())
    config["classes"] = ["only-one"]
    (folder / "classifier.json").write_text(json.dumps(config))
    with pytest.raises(staticsem.errors.ModelFormatError, match="1 classes"):
        StaticClassifier.load(folder)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        (["animal"] * 159 + [""], {}, "example 159: label '' is empty"),
        (["animal"] * 159 + [None], {}, "example 159: label None is a NoneType"),
        (["animal"] * 150, {}, "160 texts but 150 labels"),
        (["animal"] * 160, {}, "need at least 2 classes to train a classifier, the labels hold 1"),
        (
            TRAIN[1],
            {"classes": ["animal", "royal", "plant"]},
            "class 'plant' has no training examples (of 160)",
        ),
        (TRAIN[1], {"classes": ["animal"]}, "label 'royal' is not one of the 1 classes"),
        (TRAIN[1], {"dev": (["a cat"], ["plant"])}, "dev example 0: label 'plant' has no training examples"),
        (TRAIN[1], {"epochs": 0}, "epochs must be at least 1, got 0"),
    ],
)
def test_bad_labels_are_refused_with_one_line(labels: list, options: dict, message: str) -> None:
    with pytest.raises(InputError) as caught:
        StaticClassifier.fit(TRAIN[0], labels, _tiny(), **{**FAST, **options})
    assert message in str(caught.value) and "\n" not in str(caught.value)


# ---------------------------------------------------------------- command line
runner = CliRunner()


def run(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def write_tsv(path: Path, examples: tuple[list[str], list[str]]) -> Path:
    path.write_text("".join(f"{label}\t{text}\n" for text, label in zip(*examples, strict=True)), "utf-8")
    return path


def test_cli_train_and_classify(saved_model: Path, tmp_path: Path) -> None:
    train, dev = write_tsv(tmp_path / "train.tsv", TRAIN), write_tsv(tmp_path / "dev.tsv", DEV)
    out = tmp_path / "clf"
    code, _, stderr = run(
        "train-classifier", saved_model, "--train", train, "--dev", dev, "--out", out,
        "--epochs", 8, "--batch-size", 16, "--lr", 0.01, "--table-lr", 0.01, "--no-progress",
    )  # fmt: skip
    assert code == 0, stderr
    assert "2 classes" in stderr
    inputs = tmp_path / "texts.txt"
    inputs.write_text("\n".join(TEST[0]) + "\n", encoding="utf-8")
    code, stdout, stderr = run("classify", out, "--input", inputs)
    assert code == 0, stderr
    classifier = StaticClassifier.load(out)
    assert stdout.splitlines() == classifier.predict(TEST[0])
    code, _, stderr = run("classify", out, "--input", inputs, "--output", tmp_path / "p.jsonl")
    assert code == 0, stderr
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == stdout.splitlines()
    assert set(rows[0]["scores"]) == {"animal", "royal"}
    assert sum(rows[0]["scores"].values()) == pytest.approx(1.0, abs=1e-4)


def test_cli_reads_csv_and_jsonl_columns(saved_model: Path, tmp_path: Path) -> None:
    csv_file = tmp_path / "train.csv"
    csv_file.write_text(
        "review,stars\n" + "".join(f'"{t}",{lab}\n' for t, lab in zip(*TRAIN, strict=True)), "utf-8"
    )
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"review": t, "stars": lab}) + "\n" for t, lab in zip(*DEV, strict=True))
    )
    out = tmp_path / "clf"
    code, _, stderr = run(
        "train-classifier", saved_model, "--train", csv_file, "--dev", jsonl, "--out", out,
        "--text-column", "review", "--label-column", "stars", "--epochs", 3, "--no-progress", "--freeze",
    )  # fmt: skip
    assert code == 0, stderr
    assert StaticClassifier.load(out).classes == ["animal", "royal"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("animal\tthe cat\n\tthe king\n", "train.tsv:2: label '' is empty"),
        ("animal\tthe cat\nno tab here\n", "train.tsv:2: expected label<TAB>text"),
        ("animal\tthe cat\nanimal\tthe dog\n", "need at least 2 classes"),
    ],
)
def test_cli_bad_training_files_give_one_line(
    saved_model: Path, tmp_path: Path, content: str, fragment: str
) -> None:
    train = tmp_path / "train.tsv"
    train.write_text(content, encoding="utf-8")
    code, _, stderr = run("train-classifier", saved_model, "--train", train, "--out", tmp_path / "c")
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and fragment in lines[0], stderr
    assert not (tmp_path / "c").exists()


def test_cli_classify_refuses_a_plain_model(saved_model: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "t.txt"
    inputs.write_text("the cat\n")
    code, _, stderr = run("classify", saved_model, "--input", inputs)
    assert code == 2 and "not a classifier folder" in stderr


# ---------------------------------------------------------------- server
def test_classify_endpoint(tuned: StaticClassifier, tmp_path: Path) -> None:
    folder = tuned.save(tmp_path / "clf")
    limits = Limits(max_inputs=3)
    with TestClient(app_from_settings(ServeSettings(folder, limits=limits))) as client:
        body = client.post("/classify", json={"input": TEST[0][:3]}).json()
        assert [row["label"] for row in body["data"]] == tuned.predict(TEST[0][:3])
        assert body["classes"] == ["animal", "royal"]
        np.testing.assert_allclose(
            [[row["scores"][c] for c in body["classes"]] for row in body["data"]],
            tuned.predict_proba(TEST[0][:3]),
            atol=1e-5,
        )
        one = client.post("/classify", json={"input": "the king"}).json()
        assert one["data"][0]["label"] == "royal"
        over = client.post("/classify", json={"input": ["a"] * 4})
        assert over.status_code == 422 and over.json()["error"]["limit"] == "max_inputs"
        assert client.post("/classify", json={"input": []}).status_code == 422
        # the embeddings come from the classifier's (fine-tuned) table
        rows = client.post("/v1/embeddings", json={"input": ["the cat"]}).json()["data"]
        np.testing.assert_allclose(rows[0]["embedding"], tuned.model.encode("the cat"), atol=1e-6)


def test_classify_endpoint_without_a_classifier(tiny_model: StaticModel) -> None:
    with TestClient(create_app(tiny_model)) as client:
        response = client.post("/classify", json={"input": "the cat"})
    assert response.status_code == 404 and "no classifier" in response.json()["error"]["message"]


def test_importing_train_does_not_import_torch() -> None:
    code = "import sys, staticsem, staticsem.train; assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_training_computes_what_prediction_computes() -> None:
    """The torch network (table rows summed, normalised, standardised, head) gives the numpy logits."""
    import torch

    from staticsem.train.network import Inputs, Net

    model, texts = _tiny(), TEST[0] + ["", "zzz unknown", "The KING"]
    features = model.encode(texts, normalize=True)
    inputs = Inputs(model, texts, texts, features, freeze=False)
    rng = np.random.default_rng(0)
    net = Net(inputs.table, rng.normal(size=16) * 0.1, rng.uniform(0.5, 2, 16), 3, 0.0, 4)
    net.eval()  # prediction is the network without its training dropout
    with torch.no_grad():
        got = net(*inputs.batch("dev", np.arange(len(texts)))).numpy()
    np.testing.assert_allclose(got, net.head_numpy().logits(features), atol=1e-5)
