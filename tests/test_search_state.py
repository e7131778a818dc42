"""The index against a model: random sequences of writes, merges, reopenings and searches (hypothesis's
``RuleBasedStateMachine``), checked after every step against a plain dict of the live documents.

Tiny thresholds (a flush size of a few vectors, flat segments up to a dozen, tiers of two or three) make
every path happen within a few steps: the buffer, flat and graph segments, tombstones, upserts of documents
still in the buffer, tier merges, ``optimize``, deleting everything. The suite runs one fixed seed;
``scripts/fuzz.py index`` runs seed after seed for as long as it is asked to and prints a failing sequence
as the steps to replay.
"""

from __future__ import annotations

import functools
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from staticsem import StaticModel
from staticsem.errors import InputError
from staticsem.search import HnswSettings, Index
from staticsem.search.vectors import segment_file

WORDS = ["cat", "dog", "king", "queen", "bread", "soup", "river", "stone", "cloud", "lamp"]
SPELLINGS = [*WORDS, "Cat", "KING", "Soup", "zebra"]  # other cases (the same rows), a word with no row
MODEL = StaticModel(WORDS, np.random.default_rng(41).normal(size=(len(WORDS), 8)).astype(np.float32))
QUERIES = ["cat", "king queen", "Soup river stone", "zebra", "lamp cloud dog bread"]
MODES = ("dense", "bm25", "hybrid")
# index folders in memory where there is a tmpfs: a write's fsyncs cost about 90 of its 100 ms on disk
MEMORY = "/dev/shm" if Path("/dev/shm").is_dir() else None


@dataclass(frozen=True)
class Doc:
    """One document of the model: its text and its optional ``part`` (what filters match)."""

    text: str
    part: str | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        return {} if self.part is None else {"part": self.part}

    def record(self, doc_id: str) -> dict[str, Any]:
        return {"id": doc_id, "text": self.text, **self.metadata}


@functools.lru_cache(maxsize=4096)
def vector(text: str) -> np.ndarray:
    return MODEL.encode(text, normalize=True)


def words(text: str) -> set[str]:
    """The terms BM25 matches on (the analyzer lower-cases; no two of ``SPELLINGS`` share a stem)."""
    return {word.lower() for word in text.split()}


TEXTS = st.lists(st.sampled_from(SPELLINGS), max_size=4).map(" ".join)
DOCS = st.builds(Doc, TEXTS, st.sampled_from([None, "a", "b"]))
# an existing document (a number picked modulo the live ones) or a new one (None)
SLOTS = st.lists(st.tuples(DOCS, st.none() | st.integers(0, 999)), min_size=1, max_size=12)
SETTINGS = st.builds(
    HnswSettings,
    connectivity=st.sampled_from([4, 16]),
    expansion_add=st.sampled_from([8, 64]),
    expansion_search=st.sampled_from([16, 64]),
    hybrid_expansion=st.sampled_from([8, 32]),
    exact_threshold=st.integers(3, 12),
    add_threads=st.integers(1, 2),
    flush_size=st.integers(1, 6),
    merge_factor=st.integers(2, 3),
    merge_max=st.sampled_from([0, 0, 12, 60, 1000]),  # 0: tombstones stay
)


class Errors(logging.Handler):
    """The index's logged errors (a failed merge after a write is logged, not raised)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


class IndexMachine(RuleBasedStateMachine):
    """Writes, merges and reopenings of an ``Index``; ``live`` holds what it must answer from."""

    operations = 0  # rules run, over every instance (scripts/fuzz.py reports it)

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="staticsem-state-", dir=MEMORY))
        self.path = self.folder / "ix"
        self.live: dict[str, Doc] = {}  # id -> document, oldest write first (an upsert moves it last)
        self.index: Index | None = None
        self.reader: Index | None = None  # a read-only handle opened once, refreshed by its searches
        self.tolerance = 1e-4
        self.serial = 0
        self.step = 0
        self.errors = Errors()
        logging.getLogger("staticsem.search").addHandler(self.errors)

    # ------------------------------------------------------------------ the model
    def _fresh(self) -> str:
        self.serial += 1
        return f"d{self.serial}"

    def _pick(self, number: int, recent: bool) -> str:
        """A live id: any, or one of the last few written (likely still in the buffer)."""
        order = list(self.live)
        pool = order[-3:] if recent else order
        return pool[number % len(pool)]

    def _write(self, records: list[dict[str, Any]], docs: list[Doc]) -> None:
        for record, doc in zip(records, docs, strict=True):
            self.live.pop(record["id"], None)
            self.live[record["id"]] = doc

    @property
    def opened(self) -> Index:
        assert self.index is not None
        return self.index

    # ------------------------------------------------------------------ rules
    @initialize(
        docs=st.lists(DOCS, max_size=20),
        hnsw=SETTINGS,
        dtype=st.sampled_from(["float32", "float16"]),
        batch=st.integers(1, 30),
    )
    def build(self, docs: list[Doc], hnsw: HnswSettings, dtype: str, batch: int) -> None:
        IndexMachine.operations += 1
        records = [doc.record(self._fresh()) for doc in docs]
        self.index = Index.build(MODEL, records, self.path, dtype=dtype, hnsw=hnsw, batch_size=batch)
        self.index.query_threads = 1
        self._write(records, docs)
        self.tolerance = 1e-4 if dtype == "float32" else 4e-3
        self.reader = Index.open(self.path, MODEL, read_only=True)

    @rule(docs=st.lists(DOCS, min_size=1, max_size=25), batch=st.integers(1, 30))
    def add(self, docs: list[Doc], batch: int) -> None:
        IndexMachine.operations += 1
        records = [doc.record(self._fresh()) for doc in docs]
        assert self.opened.add(records, batch_size=batch) == len(records)
        self._write(records, docs)

    @rule(slots=SLOTS, recent=st.booleans(), batch=st.integers(1, 12))
    def upsert(self, slots: list[tuple[Doc, int | None]], recent: bool, batch: int) -> None:
        """Replace documents (any, or the newest: still in the buffer), the same one twice, new ones."""
        IndexMachine.operations += 1
        ids = [self._fresh() if n is None or not self.live else self._pick(n, recent) for _, n in slots]
        docs = [doc for doc, _ in slots]
        records = [doc.record(doc_id) for doc, doc_id in zip(docs, ids, strict=True)]
        assert self.opened.add(records, upsert=True, batch_size=batch) == len(set(ids))
        self._write(records, docs)

    @precondition(lambda self: self.live)
    @rule(picks=st.lists(st.integers(0, 999), min_size=1, max_size=12), how=st.sampled_from(["any", "new"]))
    def delete(self, picks: list[int], how: str) -> None:
        IndexMachine.operations += 1
        self._delete([self._pick(n, how == "new") for n in picks])

    @precondition(lambda self: self.live)
    @rule(keep=st.sampled_from([0, 2, 3, 5]))
    def delete_most(self, keep: int) -> None:
        """All documents but one in ``keep`` (0: all): more tombstones than a search asks for at first."""
        IndexMachine.operations += 1
        self._delete([doc_id for n, doc_id in enumerate(self.live) if not keep or n % keep])

    def _delete(self, ids: list[str]) -> None:
        if ids:
            assert self.opened.delete(ids) == len(set(ids))
        for doc_id in ids:
            self.live.pop(doc_id, None)

    @precondition(lambda self: self.live)
    @rule(doc=DOCS, pick=st.integers(0, 999), upsert_first=st.booleans())
    def refused_writes(self, doc: Doc, pick: int, upsert_first: bool) -> None:
        """A duplicate id, an unknown id: refused, and nothing changes (the invariants check it)."""
        IndexMachine.operations += 1
        taken = self._pick(pick, upsert_first)
        with pytest.raises(InputError, match="duplicate document id"):
            self.opened.add([doc.record(self._fresh()), doc.record(taken)])
        with pytest.raises(InputError, match="no document with id"):
            self.opened.delete([taken, "missing"])

    @rule(optimize=st.booleans())
    def merge(self, optimize: bool) -> None:
        IndexMachine.operations += 1
        self.opened.merge(optimize=optimize)
        if optimize:
            assert self.opened.info()["buffered"] == 0

    @rule(threads=st.integers(1, 2))
    def reopen(self, threads: int) -> None:
        IndexMachine.operations += 1
        self.opened.close()
        self.index = Index.open(self.path, MODEL)
        self.index.query_threads = threads

    @rule(
        query=TEXTS,
        k=st.integers(1, 12),
        mode=st.sampled_from(MODES),
        part=st.sampled_from([None, "a", "b"]),
        exact=st.booleans(),
        reader=st.booleans(),
    )
    def search(self, query: str, k: int, mode: str, part: str | None, exact: bool, reader: bool) -> None:
        IndexMachine.operations += 1
        handle = self.reader if reader else self.opened
        assert handle is not None
        self.check_search(handle, query, k, mode, part, exact)

    # ------------------------------------------------------------------ after every step
    @invariant()
    def agrees(self) -> None:
        if self.index is None:
            return
        self.step += 1
        assert not self.errors.records, self.errors.records
        info = self.index.info()
        zero = sum(not vector(doc.text).any() for doc in self.live.values())
        assert len(self.index) == info["documents"] == len(self.live)
        assert info["zero_vectors"] == zero and info["vectors"] == len(self.live) - zero
        named = {segment_file(self.path, s["name"], True).name for s in info["segments"]}
        named |= {segment_file(self.path, s["name"], False).name for s in info["segments"]}
        assert {p.name for p in self.path.glob("seg-*")} <= named  # merged-away files are gone
        assert len(list(self.path.glob("seg-*"))) == len(info["segments"])
        query, k = QUERIES[self.step % len(QUERIES)], 1 + self.step % 12
        for part in (None, "a"):
            self.check_search(self.index, query, k, "dense", part, exact=True)
            self.check_search(self.index, query, k, "dense", part, exact=False)  # graphs, over-fetching
            self.check_search(self.index, query, k, "bm25", part, exact=False)
            self.check_search(self.index, query, k, "hybrid", part, exact=self.step % 2 == 0)

    def check_search(
        self, index: Index, query: str, k: int, mode: str, part: str | None, exact: bool
    ) -> None:
        """Hits are live documents as last written; dense scores are their cosines (exact: the top k of
        brute force); BM25 and hybrid find k hits whenever k documents match."""
        where = None if part is None else {"part": part}
        hits = index.search(query, k, mode=mode, where=where, exact=exact)
        pool = {i: doc for i, doc in self.live.items() if part is None or doc.part == part}
        said = f"{mode} {'exact ' if exact else ''}search {query!r} k={k} where={where}"
        found = [hit.id for hit in hits]
        assert len(set(found)) == len(found), said
        for hit in hits:
            assert hit.id in pool, f"{said}: {hit.id} is deleted or filtered out"
            assert (hit.text, hit.metadata) == (pool[hit.id].text, pool[hit.id].metadata), said
        q = vector(query)
        cosines = {i: float(vector(d.text) @ q) for i, d in pool.items() if vector(d.text).any()}
        cosines = cosines if q.any() else {}
        matching = {i for i, d in pool.items() if words(query) & words(d.text)}
        if mode == "dense":
            assert len(hits) == min(k, len(cosines)), said
            scores = [hit.score for hit in hits]
            assert scores == pytest.approx([cosines[i] for i in found], abs=self.tolerance), said
            assert scores == sorted(scores, reverse=True), said
            if exact:
                best = sorted(cosines.values(), reverse=True)[:k]
                assert scores == pytest.approx(best, abs=self.tolerance), said
        elif mode == "bm25":
            assert set(found) <= matching and len(hits) == min(k, len(matching)), said
        else:
            either = matching | set(cosines)
            assert set(found) <= either and len(hits) == min(k, len(either)), said

    def teardown(self) -> None:
        logging.getLogger("staticsem.search").removeHandler(self.errors)
        for handle in (self.index, self.reader):
            if handle is not None:
                handle.close()
        shutil.rmtree(self.folder, ignore_errors=True)


FIXED = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def run(machine_seed: int, config: settings = FIXED) -> None:
    """Run the machine from ``machine_seed`` (a failure prints the steps that replay it)."""
    machine = seed(machine_seed)(type("IndexMachine", (IndexMachine,), {}))
    run_state_machine_as_test(machine, settings=config)


def test_the_index_agrees_with_its_model() -> None:
    run(41)
