"""The held-back split: STS-B *test* in ten machine-translated languages, alone and paired with English.

No setting of staticsem is chosen on these sets: the builds and studies tune on STS-B dev
(``../shared/data/multilingual/sts/stsb-*-dev.tsv``); this split is only reported beside it. It comes from
the same public source as the dev files (PhilipMay/stsb-multi-mt @ 30de0dec, the STS benchmark's test
split machine-translated; its licence is the STS benchmark's), read from a snapshot of that repository
(a bare git folder, as ``../shared/tools/data-recipes/`` reads its sources), and written in the dev files'
layout so that ``staticsem eval --data OUT --tasks msts,xsts`` and ``benchmarks/multilingual.py
--heldout OUT`` read it as they read the dev sets:

- ``OUT/multilingual/sts/stsb-LANG-test.tsv``: ``score<TAB>s1<TAB>s2`` (0–5), 1,379 pairs a language;
- ``OUT/multilingual/sts/stsb-en-LANG-test.tsv``: the English first sentence with the translated second one
  (as the shared ``stsb-en-LANG-dev.tsv`` are made);
- ``OUT/sts/stsb-test.tsv``: the English original;
- ``OUT/bitext/stsb-en-LANG-test.tsv``: ``english<TAB>translation``, both sentences of every pair with their
  translations, each English sentence once (its first row): a translation-retrieval set per language
  (``staticsem eval --tasks bitext``), where a user's query in one language finds its English twin.

The rows of every language must be the English rows translated (same scores, same count), or nothing is
written. Every sentence is checked against ``decontam/eval-sentences.sha1`` (the shared list names STS-B
test in all ten languages): the count of sentences not in it is printed, so a model trained with
``--exclude`` on that list never saw this split.

Run::

    python benchmarks/heldout_sts.py --snapshot /path/to/PhilipMay+stsb-multi-mt/repo \\
        --out benchmarks/.heldout
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import REPO, write_text_atomic

LANGUAGES = ("de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")
COMMIT = "30de0dec"
Rows = list[tuple[str, str, str]]  # score, sentence 1, sentence 2


def read_split(snapshot: Path, language: str, split: str = "test") -> Rows:
    """One language's split from the snapshot's ``data/stsb-LANG-SPLIT.csv`` (``s1,s2,score``)."""
    name = f"data/stsb-{language}-{split}.csv"
    found = subprocess.run(
        ["git", "--git-dir", str(snapshot), "show", f"HEAD:{name}"],
        capture_output=True,
        encoding="utf-8",
    )
    if found.returncode != 0:
        raise SystemExit(f"error: {snapshot} has no {name}: {' '.join(found.stderr.split())}")
    rows: Rows = []
    records = csv.reader(io.StringIO(found.stdout))
    for record in records:
        where = f"error: {name} line {records.line_num}"
        if len(record) != 3:
            raise SystemExit(f"{where}: {len(record)} fields, expected s1,s2,score")
        first, second, score = (field.strip() for field in record)
        try:
            value = float(score)
        except ValueError:
            raise SystemExit(f"{where}: score {score!r} is not a number") from None
        if not 0.0 <= value <= 5.0:
            raise SystemExit(f"{where}: score {score} outside 0–5")
        if any(c in text for text in (first, second) for c in "\t\n\r") or not first or not second:
            raise SystemExit(f"{where}: a sentence is empty or holds a tab or line break")
        rows.append((score, first, second))
    return rows


def aligned(english: Rows, other: Rows, language: str) -> None:
    """Stop unless ``other`` is ``english`` translated row by row (same count, same scores)."""
    if len(other) != len(english):
        raise SystemExit(f"error: {language} has {len(other)} test pairs, English {len(english)}")
    for number, (a, b) in enumerate(zip(english, other, strict=True), start=1):
        if float(a[0]) != float(b[0]):
            raise SystemExit(f"error: {language} row {number} scores {b[0]}, English {a[0]}: not aligned")


def write_tsv(path: Path, rows: Sequence[tuple[str, ...]]) -> None:
    """Tab-separated lines (``score<TAB>s1<TAB>s2``, ``english<TAB>translation``), written atomically."""
    write_text_atomic(path, "".join("\t".join(row) + "\n" for row in rows))


def translations(english: Rows, other: Rows) -> list[tuple[str, str]]:
    """Both sentences of every English row beside their translations in ``other`` (row by row), each English
    sentence once: its first occurrence."""
    pairs: dict[str, str] = {}
    for (_, first, second), (_, their_first, their_second) in zip(english, other, strict=True):
        pairs.setdefault(first, their_first)
        pairs.setdefault(second, their_second)
    return list(pairs.items())


def unlisted(sets: dict[Path, Rows], decontam: Path) -> int:
    """How many distinct sentences of ``sets`` the decontamination list does not name."""
    sys.path.insert(0, str(REPO / "src"))
    from staticsem.distillation.corpus.exclude import Exclusion

    listed = Exclusion([str(decontam)])
    sentences = {s for rows in sets.values() for _, first, second in rows for s in (first, second)}
    return sum(s not in listed for s in sentences)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--snapshot", type=Path, required=True, help="bare git folder of stsb-multi-mt")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / ".heldout", help="folder to write")
    parser.add_argument(
        "--data", type=Path, default=REPO.parent / "shared" / "data", help="shared data (its decontam list)"
    )
    args = parser.parse_args()
    english = read_split(args.snapshot, "en")
    sets: dict[Path, Rows] = {args.out / "sts" / "stsb-test.tsv": english}
    bitext: dict[Path, list[tuple[str, str]]] = {}
    for language in LANGUAGES:
        rows = read_split(args.snapshot, language)
        aligned(english, rows, language)
        sts = args.out / "multilingual" / "sts"
        sets[sts / f"stsb-{language}-test.tsv"] = rows
        sets[sts / f"stsb-en-{language}-test.tsv"] = [
            (score, en_first, second)
            for (score, en_first, _), (_, _, second) in zip(english, rows, strict=True)
        ]
        bitext[args.out / "bitext" / f"stsb-en-{language}-test.tsv"] = translations(english, rows)
    decontam = args.data / "decontam" / "eval-sentences.sha1"
    missing = unlisted(sets, decontam) if decontam.is_file() else None
    for path, rows in sets.items():
        write_tsv(path, rows)
    for path, pairs in bitext.items():
        write_tsv(path, pairs)
    print(
        f"wrote {len(sets)} sets of {len(english)} pairs and {len(bitext)} of translations to {args.out} "
        f"(stsb-multi-mt @ {COMMIT} test split)"
    )
    if missing is not None:
        print(f"sentences not in {decontam.name}: {missing}")


if __name__ == "__main__":
    main()
