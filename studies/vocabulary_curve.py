"""What does a bigger vocabulary cost and buy? Timed SWE builds at several sizes, each scored alike.

Question (issue 43): 100k words instead of 50k lifted word similarity most (rare words above all) but cost
2.7x the teacher passes, because rare words bring their own sentences. Where does the curve bend, and which
levers make a bigger vocabulary cheap (fewer sentences for rare words, fewer short sentences, learned
subword pieces in place of part of the vocabulary)?

Each run is one ``staticsem distill`` from scratch on the three Wikipedia files of ``--data/corpus`` (a
fresh work folder, under ``/usr/bin/time``: wall time and peak memory), with the shared decontamination
list as ``--exclude``, then scored in this process: the STS mean of STS-B dev, SICK-R trial and SICK-R
train, the word-similarity mean, SciFact dense nDCG@10 and the classification mean. A run is a label and
``distill`` options::

    50k=                                   the defaults
    100k=--vocab-size 100000 --rare-after 50000
    150k=--vocab-size 150000 --min-count 2 --rare-after 50000

Runs are separated by ``;``. Builds that already exist in ``--models`` are scored again, not rebuilt
(``--rebuild`` forces it). Time builds alone on the machine.

Run::

    python studies/vocabulary_curve.py --models runs/vocab --output studies/results/vocabulary_curve.json \\
        --runs "50k=;100k=--vocab-size 100000 --rare-after 50000"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _benchmarks import STS_FILES

REPO = Path(__file__).resolve().parent.parent
CORPUS = (
    "enwiki2015-sentences-00.txt.gz",
    "enwiki2015-sentences-01.txt.gz",
    "enwiki2015-sentences-02.txt.gz",
)


def build(label: str, options: str, args: argparse.Namespace) -> dict[str, Any]:
    """One timed ``staticsem distill`` into ``--models/LABEL`` (its work folder beside it)."""
    out = args.models / label
    if (out / "config.json").is_file() and not args.rebuild:
        return json.loads((out / "build.json").read_text()) if (out / "build.json").is_file() else {}
    for stale in (out, args.models / f".{label}.work"):
        shutil.rmtree(stale, ignore_errors=True)
    corpus = [part for name in CORPUS for part in ("--corpus", str(args.data / "corpus" / name))]
    exclude = ["--exclude", str(args.data / "decontam" / "eval-sentences.sha1")]
    command = [str(Path(sys.executable).parent / "staticsem"), "distill", *corpus, *exclude]
    command += [*shlex.split(options), "--out", str(out)]
    print(f"{label}: {shlex.join(command)}", flush=True)
    timed = subprocess.run(
        ["/usr/bin/time", "-v", *command],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if timed.returncode != 0:
        raise SystemExit(f"{label}: distill failed\n{timed.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", timed.stderr)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr)
    assert wall and peak
    parts = [float(p) for p in wall.group(1).split(":")]
    seconds = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    record = {
        "options": options,
        "wall_seconds": round(seconds, 1),
        "peak_mib": round(int(peak.group(1)) / 1024),
    }
    (out / "build.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def describe(folder: Path) -> dict[str, Any]:
    """Passes and steps from the model's config.json."""
    meta = json.loads((folder / "config.json").read_text())["metadata"]
    steps = meta["steps"]
    return {
        "words": len(json.loads((folder / "vocab.json").read_text())),
        "teacher_passes": meta["teacher_passes"],
        "chosen": steps["select"]["stats"]["sentences_chosen"],
        "short": steps.get("targets", {}).get("short", 0),
        "pieces": steps.get("pieces", {}).get("pieces", 0),
        "excluded": steps["vocab"].get("excluded", {}),
        "step_seconds": {name: step.get("seconds") for name, step in steps.items()},
    }


def score(folder: Path, data: Path) -> dict[str, float]:
    """STS mean (three sets), word-similarity mean, SciFact dense nDCG@10, classification mean."""
    import staticsem
    from staticsem.eval.classification import Classification
    from staticsem.eval.retrieval import Retrieval
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    model = staticsem.load(folder)
    sts = STS(data, STS_FILES)(model)
    return {
        "sts_mean": sts["mean"],
        **{f"sts:{name}": value for name, value in sts.items() if name != "mean"},
        "wordsim": WordSimilarity(data)(model)["mean"],
        "scifact": Retrieval(data / "retrieval")(model)["scifact"],
        "classification": Classification(data)(model)["mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--models", type=Path, required=True, help="folder for the builds")
    parser.add_argument("--runs", required=True, help="LABEL=DISTILL OPTIONS, separated by ;")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    args.models.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if args.output and args.output.is_file():  # runs accumulate across invocations
        results = json.loads(args.output.read_text())["results"]
    for spec in (s.strip() for s in args.runs.split(";") if s.strip()):
        label, _, options = spec.partition("=")
        started = time.perf_counter()
        record = build(label, options, args)
        results[label] = {**record, **describe(args.models / label), **score(args.models / label, args.data)}
        print(f"{label}: {json.dumps(results[label])} ({time.perf_counter() - started:.0f} s)", flush=True)
        if args.output:
            payload = {"study": "vocabulary_curve", "date": time.strftime("%Y-%m-%d"), "results": results}
            tmp = args.output.with_suffix(".tmp")
            tmp.write_text(json.dumps(payload, indent=1) + "\n")
            tmp.replace(args.output)


if __name__ == "__main__":
    main()
