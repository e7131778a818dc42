"""Evaluation tasks on tiny hand-made data: every number checked against a direct computation."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from staticsem import StaticModel
from staticsem.errors import InputError
from staticsem.eval.base import NotApplicable
from staticsem.eval.classification import Classification, _fit
from staticsem.eval.clustering import Clustering
from staticsem.eval.retrieval import Retrieval
from staticsem.eval.sts import STS
from staticsem.eval.wordsim import Analogy, WordSimilarity


class BagEncoder:
    """Counts of a few keywords: texts sharing a keyword are similar, others orthogonal."""

    def __init__(self, keywords: list[str]) -> None:
        self.keywords = keywords

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array(
            [[t.lower().split().count(k) for k in self.keywords] for t in texts], dtype=np.float32
        ).reshape(len(texts), len(self.keywords))


class TableEncoder:
    """Fixed vectors per text."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([self.table[t] for t in texts], dtype=np.float32)


def write(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


STS_A = [
    "5.0\tthe cat sat on the mat\ta cat sat on a mat",
    "3.2\tthe dog ran\ta dog ran on the mat",
    "0.5\tthe king\ta happy house",
    "4.1\tthe queen\tthe king and the queen",
    "1.0\tparis france\tthe dog",
    "2.0\tman\twoman",
]
STS_B = ["1\ta cat\ta dog", "4\tthe house\ta house", "2\tking\tman", "0\tzzz\tthe mat"]


def cosine_spearman(model: StaticModel, rows: list[str]) -> float:
    fields = [r.split("\t") for r in rows]
    a, b = model.encode([f[1] for f in fields]), model.encode([f[2] for f in fields])
    return 100 * spearmanr([float(f[0]) for f in fields], np.einsum("ij,ij->i", a, b)).statistic


def test_sts_pools_each_file_and_records_the_data(tiny_model: StaticModel, tmp_path: Path) -> None:
    a = write(tmp_path / "sts" / "a.tsv", STS_A)
    write(tmp_path / "sts" / "b.tsv", STS_B)
    task = STS(tmp_path, files=("a.tsv", "b.tsv"))
    got = task(tiny_model)
    assert got["a"] == pytest.approx(cosine_spearman(tiny_model, STS_A), abs=1e-6)
    assert got["b"] == pytest.approx(cosine_spearman(tiny_model, STS_B), abs=1e-6)
    assert got["mean"] == pytest.approx((got["a"] + got["b"]) / 2)
    assert STS(tmp_path / "sts", files=("a.tsv", "b.tsv"))(tiny_model) == got  # the task folder works too
    first = task.describe()["files"][0]
    assert first["rows"] == len(STS_A) and first["sha256"] == hashlib.sha256(a.read_bytes()).hexdigest()
    assert task.describe()["datasets"] == ["a", "b"]


def test_sts_reports_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found; looked in"):
        STS(tmp_path, files=("missing.tsv",))
    write(tmp_path / "bad.tsv", ["1\tone\ttwo", "2\tonly two"])
    with pytest.raises(InputError, match=r"bad.tsv:2: expected 3"):
        STS(tmp_path, files=("bad.tsv",))
    write(tmp_path / "nan.tsv", ["high\tone\ttwo"])
    with pytest.raises(InputError, match="row 1: 'high' is not a number"):
        STS(tmp_path, files=("nan.tsv",))


def test_word_similarity_counts_words_without_vector_as_not_covered(
    tiny_model: StaticModel, tmp_path: Path
) -> None:
    rows = [
        "cat\tdog\t7",
        "king\tqueen\t9",
        "man\twoman\t8",
        "house\tmat\t3",
        "qqq\tcat\t5",
        "Paris\tfrance\t6",
    ]
    write(tmp_path / "wordsim" / "toy.tsv", rows)
    got = WordSimilarity(tmp_path)(tiny_model)
    covered = [r.split("\t") for r in rows if not r.startswith("qqq")]
    cosine = [float(tiny_model.encode(a) @ tiny_model.encode(b)) for a, b, _ in covered]
    expected = 100 * spearmanr([float(g) for *_, g in covered], cosine).statistic
    assert got["toy"] == pytest.approx(expected, abs=1e-5)
    assert got["toy_coverage"] == pytest.approx(100 * 5 / 6)
    assert got["mean"] == got["toy"]


def analogy_model() -> StaticModel:
    rng = np.random.default_rng(3)
    basis = np.linalg.qr(rng.normal(size=(12, 12)))[0]
    male, female, royal, city, country, name = basis[:6]
    words = {
        "man": male,
        "woman": female,
        "king": male + royal,
        "queen": female + royal,
        "paris": city + name,
        "france": country + name,
        "berlin": city + basis[6],
        "germany": country + basis[6],
        "noise": basis[7],
    }
    return StaticModel(list(words), np.array(list(words.values()), dtype=np.float32))


def test_analogy_3cosadd_accuracy_and_coverage(tmp_path: Path) -> None:
    write(
        tmp_path / "analogy" / "google-toy.tsv",
        [
            "family\tman\tking\twoman\tqueen",
            "capital\tParis\tFrance\tBerlin\tGermany",
            "gram-x\tking\tman\tqueen\twoman",
            "family\tman\tking\tgirl\tqueen",
        ],
    )
    task = Analogy(tmp_path, files=("google-toy.tsv",))
    got = task(analogy_model())
    assert got["google-toy"] == 100.0
    assert got["google-toy_coverage"] == 75.0
    assert got["google-toy_semantic"] == 100.0 and got["google-toy_syntactic"] == 100.0
    with pytest.raises(NotApplicable):
        task(BagEncoder(["king"]))


def test_classification_kfold_split_and_dev(tmp_path: Path) -> None:
    folder = tmp_path / "classification"
    rows = [f"pos\tgood {'film ' * (i % 3)}" for i in range(20)] + [
        f"neg\tbad {'plot ' * (i % 3)}" for i in range(20)
    ]
    write(folder / "toy-all.tsv", rows)
    write(folder / "tt-train.tsv", rows)
    write(folder / "tt-test.tsv", ["pos\tgood", "neg\tbad plot"])
    write(folder / "sd-train.tsv", rows)
    write(folder / "sd-dev.tsv", ["pos\tgood film", "neg\tbad"])
    write(folder / "sd-test.tsv", ["pos\tgood", "neg\tbad", "neg\tbad bad"])
    write(folder / "lonely-dev.tsv", ["pos\tgood"])
    encoder = BagEncoder(["good", "bad", "film", "plot"])
    task = Classification(tmp_path, datasets=["toy", "tt", "sd"], folds=5)
    got = task(encoder)
    assert got == {"toy": 100.0, "tt": 100.0, "sd_dev": 100.0, "sd": 100.0, "mean": 100.0}
    assert [f["rows"] for f in task.describe()["files"]] == [40, 40, 2, 40, 2, 3]
    with pytest.raises(InputError, match="need lonely-all.tsv or lonely-train.tsv"):
        Classification(tmp_path, datasets=["lonely"])


def test_classification_scores_held_out_rows_not_the_training_ones(tmp_path: Path) -> None:
    """A mislabelled row with a word of its own is learnt when trained on (weak regularisation) but
    predicted from its other word when held out: training and held-out accuracy differ."""
    folder = tmp_path / "classification"
    clean = [f"pos\tgood {'film ' * (i % 2)}" for i in range(18)] + [
        f"neg\tbad {'plot ' * (i % 2)}" for i in range(20)
    ]
    odd = [f"pos\tbad odd{i}" for i in range(5)]
    write(folder / "toy-all.tsv", clean + odd[:2])  # 20 pos, 20 neg: 4 folds of 10 rows
    write(folder / "tt-train.tsv", clean + odd[:2])
    write(folder / "tt-test.tsv", ["pos\tgood", "neg\tbad", "pos\tbad odd2", "neg\tbad plot"])
    write(folder / "sd-train.tsv", clean + odd[:2])
    write(folder / "sd-dev.tsv", ["pos\tgood film", "neg\tbad", "pos\tbad odd3"])
    write(folder / "sd-test.tsv", ["pos\tgood", "neg\tbad", "pos\tbad odd4", "neg\tbad plot"])
    encoder = BagEncoder(["good", "bad", "film", "plot", *(f"odd{i}" for i in range(5))])
    task = Classification(tmp_path, datasets=["toy", "tt", "sd"], folds=4, c_values=(1000.0,))
    got = task(encoder)
    assert got == pytest.approx({"toy": 95.0, "tt": 75.0, "sd_dev": 200 / 3, "sd": 75.0, "mean": 245 / 3})
    labels = np.array([row.split("\t")[0] for row in clean + odd[:2]])
    features = encoder.encode([row.split("\t")[1] for row in clean + odd[:2]])
    assert (_fit((labels, features), 1000.0).predict(features) == labels).all()  # on training rows: 100


def beir(root: Path) -> Path:
    folder = root / "retrieval" / "toy"
    docs = [{"_id": d, "title": "", "text": d} for d in ("d1", "d2", "d3", "d4")]
    write(folder / "corpus.jsonl", [json.dumps(d) for d in docs])
    queries = [{"_id": q, "text": q} for q in ("q1", "q2", "q3")]
    write(folder / "queries.jsonl", [json.dumps(q) for q in queries])
    write(
        folder / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q1\td3\t1", "q2\td4\t1"]
    )
    return folder


def test_retrieval_ndcg_and_recall_of_a_known_ranking(tmp_path: Path) -> None:
    beir(tmp_path)
    # q1 ranks d1 > d2 > d3 > d4 (relevant: d1, d3); q2 ranks d4 last (relevant: d4).
    table = {
        "q1": [1.0, 0.0],
        "q2": [0.0, 1.0],
        "q3": [1.0, 1.0],
        "d1": [1.0, 0.0],
        "d2": [0.9, 0.44],
        "d3": [0.7, 0.71],
        "d4": [-0.2, -0.98],
    }
    got = Retrieval(tmp_path)(TableEncoder(table))
    q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    q2 = 1 / math.log2(5)
    assert got["toy"] == pytest.approx(100 * (q1 + q2) / 2)
    assert got["toy_recall@100"] == 100.0
    shallow = Retrieval(tmp_path / "retrieval" / "toy", depth=2)(TableEncoder(table))
    assert shallow["toy_recall@2"] == pytest.approx(100 * (0.5 + 0.0) / 2)


def test_retrieval_reports_bad_layouts(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no BEIR folder"):
        Retrieval(tmp_path)
    folder = beir(tmp_path)
    write(folder / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q9\td1\t1"])
    with pytest.raises(InputError, match="1 judged queries not in queries.jsonl"):
        Retrieval(tmp_path)


def test_clustering_v_measure(tmp_path: Path) -> None:
    rows = [
        f"{label}\t{word} {filler}"
        for label, word in [("a", "cat"), ("b", "dog"), ("c", "car")]
        for filler in "xyz"
    ]
    write(tmp_path / "clustering" / "toy.tsv", rows)
    got = Clustering(tmp_path, runs=2)(BagEncoder(["cat", "dog", "car"]))
    assert got["toy"] == pytest.approx(100.0) and got["toy_std"] == pytest.approx(0.0)
    one_cluster = Clustering(tmp_path, runs=1)(BagEncoder(["x"]))  # nothing tells the labels apart
    assert one_cluster["toy"] < 100.0


def test_bitext_retrieval_top1_in_both_directions(tmp_path: Path) -> None:
    from staticsem.eval.bitext import BitextRetrieval

    write(tmp_path / "parallel" / "en-de-train.tsv", ["never\tread"])  # training files are skipped
    write(tmp_path / "parallel" / "tatoeba.tsv", ["dog\tHund", "cat\tKatze", "tree\tBaum", "cat\tKatze"])
    table = {
        "dog": [1, 0, 0],
        "cat": [0, 1, 0],
        "tree": [0, 0, 1],
        "Hund": [1, 0.1, 0],
        "Katze": [0.9, 1, 0],  # closer to "cat" than to "dog"
        "Baum": [1, 0, 0.2],  # closest to "dog": "tree" misses it, "Baum" finds "dog"
    }
    task = BitextRetrieval(tmp_path)
    assert task.datasets == ["tatoeba"] and len(task.files) == 1
    metrics = task(TableEncoder(table))
    # en→de: dog→Hund, cat→Katze, tree→Baum (the only German text with a tree component), cat→Katze
    # de→en: Hund→dog, Katze→cat, Baum→dog (wrong), Katze→cat (the duplicate pair: the same text counts)
    assert metrics["tatoeba/left-right"] == pytest.approx(100.0)
    assert metrics["tatoeba/right-left"] == pytest.approx(75.0)
    assert metrics["tatoeba"] == metrics["mean"] == pytest.approx(87.5)


def test_cross_lingual_sts_reads_its_own_folder(tmp_path: Path) -> None:
    from staticsem.eval.sts import CrossLingualSTS

    write(tmp_path / "sts" / "stsb-dev.tsv", STS_B)  # not read by the cross-lingual task
    write(
        tmp_path / "xsts" / "stsb-dev-en-de.tsv",
        ["4\tthe dog\tder Hund", "1\tthe dog\tdie Katze", "2\tcat\tHund"],
    )
    table = {"the dog": [1, 0], "der Hund": [1, 0.1], "die Katze": [0, 1], "cat": [0.2, 1], "Hund": [1, 0.3]}
    task = CrossLingualSTS(tmp_path)
    assert task.name == "xsts" and task.datasets == ["stsb-dev-en-de"]
    gold, a, b = [4, 1, 2], [[1, 0], [1, 0], [0.2, 1]], [[1, 0.1], [0, 1], [1, 0.3]]
    cosines = [np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b, strict=True)]
    assert task(TableEncoder(table))["mean"] == pytest.approx(100 * spearmanr(gold, cosines).statistic)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*.tsv files"):
        CrossLingualSTS(tmp_path / "empty")
