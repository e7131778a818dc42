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

from staticsem.distillation.corpus.phrase_choice import Runs
from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.corpus.scan import Words, scan
from staticsem.errors import InputError
from staticsem.phrases import PhraseTable

logger = logging.getLogger(__name__)
RECORD = "corpus.json"  # written last: the folder is complete
FILES = {"ids": np.int32, "tokens": np.int32, "lengths": np.int32}  # raw arrays, appended while scanning
LINKS = "links"  # uint8 per word, when the scan was asked for links (phrases)
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
        names = [*FILES, LINKS] if words.links else list(FILES)
        handles = {name: (partial / f"{name}.bin").open("wb") for name in names}
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
                if chunk.links is not None:
                    chunk.links.astype(np.uint8).tofile(handles[LINKS])
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

    def _row_of(self, vocab: Sequence[str]) -> np.ndarray:
        """Each stored word's row in ``vocab`` (-1 where it is not there)."""
        index = {word: i for i, word in enumerate(self.words)}
        row_of = np.full(len(self.words), -1, np.int64)
        for row, word in enumerate(vocab):
            found = index.get(word)
            if found is not None:
                row_of[found] = row
        return row_of

    def _ids(self) -> np.ndarray:
        """Every sentence's word ids, end to end (memory-mapped)."""
        path = self.folder / "ids.bin"
        return np.memmap(path, dtype=FILES["ids"], mode="r") if path.stat().st_size else np.zeros(0, np.int32)

    def rows(self, vocab: Sequence[str], phrases: PhraseTable | None = None) -> Iterator[list[int]]:
        """Each sentence's words that are in ``vocab``, as rows of it, in order (``select_sentences``'s
        ``ids``); with ``phrases`` (a table over these rows), each phrase found after its words."""
        tokens = self._array("tokens").astype(np.int64)
        starts = range(0, self.sentences, ID_ROWS)
        for first, chunk in zip(starts, self.runs(vocab, links=phrases is not None), strict=True):
            rows, sizes = chunk.rows, tokens[first : first + ID_ROWS]
            if phrases is not None:
                rows, sizes = phrases.apply(rows, sizes, phrases.match(rows, chunk.links), "add")
            known = rows >= 0
            before = np.concatenate([[0], np.cumsum(known)])  # known rows before each position
            edges = before[np.concatenate([[0], np.cumsum(sizes)])]
            flat, at = rows[known].tolist(), 0
            for size in np.diff(edges).tolist():
                yield flat[at : at + size]
                at += size

    def has_links(self) -> bool:
        """Whether the scan stored each word's link to the next (a build with phrases asks for them)."""
        return (self.folder / f"{LINKS}.bin").is_file()

    def runs(self, vocab: Sequence[str], links: bool = True) -> Iterator[Runs]:
        """The corpus's words as rows of ``vocab`` (-1 outside it) with their links (all False unless
        ``links``), ``ID_ROWS`` sentences at a time (a run never crosses a sentence: a sentence's last word
        links to nothing).

        :raises InputError: for links of a corpus stored without them.
        """
        row_of = self._row_of(vocab)
        ids = self._ids()
        stored = None
        if links and len(ids):
            if not self.has_links():
                raise InputError(f"{self.folder}: stored without the words' links (phrases need them)")
            stored = np.memmap(self.folder / f"{LINKS}.bin", dtype=np.uint8, mode="r")
        bounds = np.concatenate([[0], np.cumsum(self._array("tokens"), dtype=np.int64)])
        for first in range(0, self.sentences, ID_ROWS):
            start, stop = int(bounds[first]), int(bounds[min(first + ID_ROWS, self.sentences)])
            joins = np.zeros(stop - start, bool) if stored is None else np.asarray(stored[start:stop], bool)
            yield Runs(row_of[ids[start:stop]], joins)

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
