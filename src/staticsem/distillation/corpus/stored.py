"""The corpus read once: ``StoredCorpus`` keeps what the counting pass saw, so the later steps read no text.

The vocabulary step scans the corpus (``scan``, on every core) and stores in the work folder: its sentences,
each sentence's words as ids into the table of every distinct word (first-seen order), those words' counts,
each sentence's ``word_count`` and the excluded tally. The sentence choice then runs on the ids (no reading,
splitting or hashing), and the short sentences are drawn from the stored sentences. The files are written
into a temporary folder that is renamed when complete, so a stopped scan leaves nothing half-written; a
folder made for other corpus options, splitter or teacher is never opened (its key differs).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.corpus.scan import Words, scan
from staticsem.errors import InputError

logger = logging.getLogger(__name__)
RECORD = "corpus.json"  # written last: the folder is complete
FILES = {"ids": np.int32, "tokens": np.int32, "lengths": np.int32}  # raw arrays, appended while scanning
SENTENCES = "sentences.txt"
ID_ROWS = 1 << 16  # sentences whose word ids are turned into vocabulary rows at once


@dataclass
class StoredCorpus:
    """A corpus as the vocabulary step read it (``build``), in ``folder``."""

    folder: Path
    words: list[str]  # every distinct word, in first-seen order
    counts: np.ndarray  # int64, their counts
    sentences: int
    excluded: dict[str, int]

    @classmethod
    def build(
        cls,
        folder: Path,
        sources: Sequence[str],
        options: CorpusOptions,
        words: Words,
        *,
        workers: int = 1,
        show_progress: bool = True,
    ) -> StoredCorpus:
        """Scan ``sources`` on ``workers`` processes into ``folder`` (replaced once complete).

        :raises InputError: when the corpus holds no usable sentence.
        """
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        table: dict[str, int] = {}
        excluded: dict[str, int] = {}
        counts = np.zeros(0, np.int64)
        total = 0
        progress = tqdm(desc="reading the corpus", unit=" sent", disable=not show_progress, mininterval=2)
        handles = {name: (partial / f"{name}.bin").open("wb") for name in FILES}
        with (partial / SENTENCES).open("wb") as text, progress:
            for chunk in scan(sources, options, workers=workers, excluded=excluded, words=words, table=table):
                assert chunk.ids is not None and chunk.tokens is not None
                if chunk.sentences:
                    text.write(("\n".join(chunk.sentences) + "\n").encode("utf-8", "surrogatepass"))
                for name, values in (
                    ("ids", chunk.ids),
                    ("tokens", chunk.tokens),
                    ("lengths", chunk.lengths),
                ):
                    values.astype(FILES[name]).tofile(handles[name])
                grown = np.bincount(chunk.ids, minlength=len(table))
                grown[: len(counts)] += counts
                counts, total = grown, total + len(chunk.sentences)
                progress.update(len(chunk.sentences))
        for handle in handles.values():
            handle.close()
        if total == 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise InputError("the corpus holds no usable sentence (empty, or no line within the word limits)")
        record = {"words": list(table), "counts": counts.tolist(), "sentences": total, "excluded": excluded}
        (partial / RECORD).write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        logger.info("read %d sentences, %d distinct words, into %s", total, len(table), folder)
        return cls(folder, list(table), counts, total, excluded)

    @classmethod
    def open(cls, folder: Path) -> StoredCorpus | None:
        """The complete stored corpus in ``folder``, or None."""
        path = folder / RECORD
        if not path.is_file():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            folder,
            record["words"],
            np.asarray(record["counts"], np.int64),
            record["sentences"],
            record["excluded"],
        )

    def counter(self) -> Counter[str]:
        """The word counts, in first-seen order (what ``sampling.count_words`` counts)."""
        return Counter(dict(zip(self.words, self.counts.tolist(), strict=True)))

    def _array(self, name: str) -> np.ndarray:
        return np.fromfile(self.folder / f"{name}.bin", dtype=FILES[name])

    def lengths(self) -> np.ndarray:
        """Each sentence's ``word_count`` (what the length limits read)."""
        return self._array("lengths")

    def rows(self, vocab: Sequence[str]) -> Iterator[list[int]]:
        """Each sentence's words that are in ``vocab``, as rows of it, in order (``select_sentences``'s
        ``ids``)."""
        index = {word: i for i, word in enumerate(self.words)}
        row_of = np.full(len(self.words), -1, np.int64)
        for row, word in enumerate(vocab):
            found = index.get(word)
            if found is not None:
                row_of[found] = row
        path = self.folder / "ids.bin"
        ids = np.memmap(path, dtype=FILES["ids"], mode="r") if path.stat().st_size else np.zeros(0, np.int32)
        bounds = np.concatenate([[0], np.cumsum(self._array("tokens"), dtype=np.int64)])
        for first in range(0, self.sentences, ID_ROWS):
            last = min(first + ID_ROWS, self.sentences)
            start, stop = int(bounds[first]), int(bounds[last])
            rows = row_of[ids[start:stop]]
            known = rows >= 0
            before = np.concatenate([[0], np.cumsum(known)])  # known words before each position
            edges = before[bounds[first : last + 1] - start]
            flat, at = rows[known].tolist(), 0
            for size in np.diff(edges).tolist():
                yield flat[at : at + size]
                at += size

    def texts(self, wanted: Iterable[int] | None = None) -> Iterator[str]:
        """The sentences numbered ``wanted`` (ascending), or every one, in order."""
        chosen = None if wanted is None else iter(wanted)
        target = -1 if chosen is None else next(chosen, None)
        if target is None:
            return
        with (self.folder / SENTENCES).open("rb") as handle:
            for number, line in enumerate(handle):
                if number == self.sentences:
                    return
                if chosen is None:
                    yield line[:-1].decode("utf-8", "surrogatepass")
                elif number == target:
                    yield line[:-1].decode("utf-8", "surrogatepass")
                    target = next(chosen, None)
                    if target is None:
                        return
