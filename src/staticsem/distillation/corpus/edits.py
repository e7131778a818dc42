"""Edited copies of short sentences: the fine distinctions a sentence-similarity pair tests.

A random batch of corpus sentences teaches a table which topics lie near each other; sentence-similarity
pairs mostly differ by a word or two ("a man is playing a guitar" / "... a piano" / "... is not playing").
For ``sentences`` short corpus sentences, each gets up to one copy per edit kind:

- ``drop``: one of its words left out;
- ``swap``: one of its words replaced by one of that word's ``neighbours`` nearest words in the table
  being trained (among the ``SWAP_WORDS`` most frequent), the copy keeping the word's capital;
- ``negate``: an English negation: its first ``not`` left out where it has one, else ``not`` put after
  its first auxiliary (``is``, ``can``, ``did`` ...); nothing where it has neither.

Only words of letters that are among the table's ``SWAP_WORDS`` most frequent are dropped or swapped. The
teacher embeds every copy; distillation puts whole families (a sentence and its copies) into its batches,
so the in-batch loss ranks them against each other as the teacher does (``stages.training``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from staticsem.distillation.method import setting
from staticsem.errors import InputError
from staticsem.model import StaticModel

KINDS = ("drop", "swap", "negate")
SWAP_WORDS = 30_000  # words a swap may take or give: the frequent ones, whose rows are trained well
AUXILIARIES = frozenset(
    {
        *("is", "are", "was", "were", "am", "be", "been", "can", "could", "will", "would", "shall"),
        *("should", "may", "might", "must", "do", "does", "did", "has", "have", "had"),
    }
)
WORD = re.compile(r"[^\W\d_]+")
DEFAULT_SENTENCES = 30_000


@dataclass(frozen=True)
class EditSettings:
    """How many short sentences get edited copies, and which (``--edit-*``)."""

    # on the default English recipe 30,000 families at a quarter of each batch: STS mean 73.85 -> 74.48
    # (studies/README.md §phrases.py, edited copies)
    sentences: int | None = setting(
        None,
        "Short sentences that each get edited copies (a word dropped, a word swapped for a near one, a "
        f"negation) as distillation targets, taught side by side in the same batches [default: "
        f"{DEFAULT_SENTENCES:,} where the build is of one language and draws short sentences; 0: none].",
    )
    kinds: str = setting(",".join(KINDS), "Edit kinds, comma-separated: drop, swap, negate.")
    neighbours: int = setting(10, "A swapped word becomes one of its this many nearest words.")
    share: float = setting(0.25, "Share of each distillation batch made of whole edit families.")

    def kind_list(self) -> tuple[str, ...]:
        return tuple(k.strip() for k in self.kinds.split(",") if k.strip())

    def count(self, short: bool, languages: int) -> int:
        """How many sentences to edit: ``sentences``, by default ``DEFAULT_SENTENCES`` in a build of one
        language that draws ``short`` sentences (else none)."""
        if self.sentences is not None:
            return self.sentences
        return DEFAULT_SENTENCES if short and languages <= 1 else 0

    def validate(self, short: bool = True, languages: int = 1, group_share: float = 0.0) -> None:
        """Raise ``InputError`` for settings that cannot work (in a build that draws ``short`` sentences
        or not, of ``languages`` languages, with neighbour groups filling ``group_share`` of a batch)."""
        if self.sentences is not None and self.sentences < 0:
            raise InputError(f"--edit-sentences must be 0 or more, got {self.sentences}")
        unknown = [k for k in self.kind_list() if k not in KINDS]
        if unknown or not self.kind_list():
            raise InputError(f"--edit-kinds takes {', '.join(KINDS)} (comma-separated), got {self.kinds!r}")
        if self.neighbours < 1:
            raise InputError(f"--edit-neighbours must be at least 1, got {self.neighbours}")
        if not 0.0 < self.share < 1.0:
            raise InputError(f"--edit-share must be above 0 and below 1, got {self.share}")
        if not self.count(short, languages):
            return
        if not short:
            raise InputError("--edit-sentences edits the short sentences: it needs --kd-short above 0")
        if languages > 1:
            raise InputError("--edit-sentences works on a build of one language (its negation is English)")
        if self.share + group_share > 1.0:
            raise InputError(
                f"--edit-share and --kd-groups fill more than a batch: {self.share} + {group_share}"
            )


def nearest_words(model: StaticModel, words: Sequence[str], count: int, among: int = SWAP_WORDS) -> dict:
    """Each of ``words`` (in the model's first ``among`` rows) → its ``count`` nearest words there by
    cosine, nearest first (never itself in another case, a phrase or a word with other than letters)."""
    rows = [i for i, w in enumerate(model.vocab[:among]) if WORD.fullmatch(w)]
    lowered = np.unique([model.vocab[r].lower() for r in rows], return_inverse=True)[1]  # a form as an id
    table = np.asarray(model.vectors[rows], np.float32)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    at = {model.vocab[r]: i for i, r in enumerate(rows)}
    wanted = [w for w in dict.fromkeys(words) if w in at]
    count = min(count, len(rows) - 1)
    found: dict[str, list[str]] = {}
    if count < 1:
        return found
    for start in range(0, len(wanted), 2048):
        chunk = wanted[start : start + 2048]
        ids = np.array([at[w] for w in chunk])
        cosines = table[ids] @ table.T
        cosines[lowered[None, :] == lowered[ids][:, None]] = -np.inf  # nor its own neighbour in any case
        best = np.argpartition(-cosines, count - 1, axis=1)[:, :count]
        order = np.take_along_axis(cosines, best, axis=1).argsort(axis=1)[:, ::-1]
        for word, row, picked in zip(chunk, cosines, np.take_along_axis(best, order, axis=1), strict=True):
            if near := [model.vocab[rows[j]] for j in picked if np.isfinite(row[j])]:
                found[word] = near
    return found


def edited(sentence: str, near: dict, kinds: Sequence[str], rng: random.Random) -> list[str]:
    """The copies of ``sentence`` (one per kind where the kind applies), none equal to it or each other."""
    tokens = sentence.split(" ")
    editable = [i for i, t in enumerate(tokens) if WORD.fullmatch(t) and t.lower() in near]
    copies: list[str] = []
    for kind in kinds:
        words = list(tokens)
        if kind == "drop" and len(editable) > 1:
            del words[rng.choice(editable)]
        elif kind == "swap" and editable:
            at = rng.choice(editable)
            new = rng.choice(near[words[at].lower()])
            words[at] = new[0].upper() + new[1:] if words[at][0].isupper() else new
        elif kind == "negate":
            if "not" in words:
                del words[words.index("not")]
            elif auxiliary := [i for i, t in enumerate(words) if t.lower() in AUXILIARIES]:
                words.insert(auxiliary[0] + 1, "not")
        copy = " ".join(words)
        if copy != sentence and copy not in copies:
            copies.append(copy)
    return copies


def edit_families(
    sentences: Sequence[str], model: StaticModel, settings: EditSettings, seed: int
) -> tuple[list[str], list[tuple[int, int]]]:
    """The copies of ``sentences`` (in order) and, for each sentence that got any, (its index, how many
    copies follow in the list)."""
    kinds = settings.kind_list()
    needed = {t.lower() for s in sentences for t in s.split(" ") if WORD.fullmatch(t)}
    near = nearest_words(model, sorted(needed), settings.neighbours) if {"drop", "swap"} & set(kinds) else {}
    rng = random.Random(seed)
    copies: list[str] = []
    families: list[tuple[int, int]] = []
    for index, sentence in enumerate(sentences):
        made = edited(sentence, near, kinds, rng)
        if made:
            families.append((index, len(made)))
            copies.extend(made)
    return copies, families
