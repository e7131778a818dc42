"""The server's write lane: a write that was saved is never answered 500, and random concurrent adds,
upserts, deletes and searches over HTTP (a real ``staticsem serve`` on 127.0.0.1) for a bounded time: no
5xx, every acknowledged write is seen by the next search and survives a restart.

``scripts/fuzz.py serve`` runs the same clients for longer.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

import staticsem
from servers import running
from staticsem import StaticModel
from staticsem.search import HnswSettings, Index
from staticsem.serve import create_app

KEY_ENV, KEY = "STATICSEM_LANE_KEY", "lane-key"
WORDS = ["the", "cat", "sat", "on", "mat", "dog", "king", "queen", "man", "woman", "paris", "france"]
# tiny thresholds: writes land in the buffer, flush into flat and graph segments, and merge, within seconds
SETTINGS = HnswSettings(flush_size=3, exact_threshold=8, merge_factor=2, merge_max=200, add_threads=1)


def lane_model(folder: Path) -> Path:
    """A small model of ``WORDS``, saved (the server loads it by path)."""
    rng = np.random.default_rng(41)
    return StaticModel(WORDS, rng.normal(size=(len(WORDS), 8)).astype(np.float32)).save(folder / "model")


def test_a_saved_write_is_never_answered_500_after_every_document_is_deleted(
    saved_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleting every document leaves a segment without a live vector: the merge after the last delete
    drops it, and every later write answers 200 (before: a 500 for writes that were saved)."""
    docs = [{"id": f"d{i}", "text": f"the {w}"} for i, w in enumerate(WORDS)]
    Index.build(saved_model, docs, tmp_path / "ix", hnsw=HnswSettings(flush_size=4)).close()
    index = Index.open(tmp_path / "ix", model=staticsem.load(saved_model))
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(create_app(index.model, index=index, api_key=KEY)) as client:
        for doc in docs:
            assert client.delete(f"/documents/{doc['id']}", headers=auth).status_code == 200
        for n in range(2):
            new = {"documents": [{"id": f"new{n}", "text": "a queen in paris"}]}
            assert client.post("/documents", json=new, headers=auth).status_code == 200
        hits = client.post("/search", json={"query": "queen", "k": 5, "mode": "bm25"}).json()["hits"]
        assert sorted(h["id"] for h in hits) == ["new0", "new1"]
        info = client.get("/info").json()["index"]
        assert info["documents"] == 2 and info["segments"] == [] and info["buffered"] == 2
    assert "merge after a write failed" not in caplog.text
    index.close()


def test_a_merge_failing_after_a_saved_write_is_logged_not_answered_500(
    saved_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from staticsem.search import writes

    Index.build(saved_model, [], tmp_path / "ix", hnsw=HnswSettings(flush_size=1, merge_factor=2)).close()
    index = Index.open(tmp_path / "ix", model=staticsem.load(saved_model))

    def broken(*args: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(writes, "merge_segments", broken)
    auth = {"Authorization": f"Bearer {KEY}"}
    with TestClient(create_app(index.model, index=index, api_key=KEY)) as client:
        for n in range(3):  # a segment per write: from the second, a merge is due, and fails
            new = {"documents": [{"id": f"d{n}", "text": "a queen in paris"}]}
            assert client.post("/documents", json=new, headers=auth).json()["documents"] == n + 1
        assert client.delete("/documents/d0", headers=auth).status_code == 200
        hits = client.post("/search", json={"query": "queen", "k": 5, "mode": "dense"}).json()["hits"]
        assert sorted(h["id"] for h in hits) == ["d1", "d2"]
    assert "the merge after a write failed (the write is saved)" in caplog.text
    assert len(index.snapshot.segments) == 3
    index.close()


# ---------------------------------------------------------------------- random clients over HTTP
@dataclass
class Client:
    """One connection's writes. Each client owns its documents (``owner`` metadata, an owner word in the
    text, a word of its own per document), so what it was told is committed is what its searches must see."""

    number: int
    seed: int
    rng: random.Random = field(init=False)
    live: dict[str, str] = field(default_factory=dict)  # id -> its own word, acknowledged
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    log: list[str] = field(default_factory=list)
    serial: int = 0
    operations: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    @property
    def owner(self) -> str:
        return f"owner{self.number}z"

    def word(self) -> str:
        self.serial += 1
        return f"c{self.number}n{self.serial}z"

    def document(self, doc_id: str, word: str) -> dict[str, Any]:
        text = f"{self.owner} {word} {' '.join(self.rng.sample(WORDS, 3))}"
        return {"id": doc_id, "text": text, "metadata": {"owner": str(self.number)}}


class LaneError(AssertionError):
    pass


def _call(http: httpx.Client, client: Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    answer = http.request(method, url, **kwargs)
    client.statuses[answer.status_code] += 1
    client.log.append(f"{method} {url} {kwargs.get('json', '')} -> {answer.status_code}")
    if answer.status_code >= 500:
        raise LaneError(f"client {client.number}: {answer.status_code} {answer.text}")
    return answer


def _found(http: httpx.Client, client: Client, query: str, k: int = 10) -> set[str]:
    """Ids BM25 finds for ``query`` among the client's own documents."""
    body = {"query": query, "k": k, "mode": "bm25", "where": {"owner": str(client.number)}}
    answer = _call(http, client, "POST", "/search", json=body)
    assert answer.status_code == 200, answer.text
    return {hit["id"] for hit in answer.json()["hits"]}


def check_owned(http: httpx.Client, client: Client, sample: int | None = None) -> None:
    """The client's acknowledged documents, exactly: all by the owner word, each (or ``sample`` of them)
    by its own word."""
    assert _found(http, client, client.owner, 1000) == set(client.live), client.number
    owned = sorted(client.live.items())
    for doc_id, word in owned if sample is None else client.rng.sample(owned, min(sample, len(owned))):
        assert _found(http, client, word) == {doc_id}, (client.number, doc_id)


def step(http: httpx.Client, client: Client) -> None:
    """One random request and what the next search must see after it."""
    rng, auth = client.rng, {"Authorization": f"Bearer {KEY}"}
    client.operations += 1
    action = rng.choice(["add", "add", "upsert", "delete", "search", "refused"])
    mine = sorted(client.live)
    if action == "add" and len(mine) > 300:  # stays under max_k (the owner search finds them all)
        action = "delete"
    if action == "add" or (action in ("upsert", "delete", "refused") and not mine):
        fresh = [
            (f"{client.number}-{client.serial + 1}-{i}", client.word()) for i in range(rng.randint(1, 6))
        ]
        body = {"documents": [client.document(i, w) for i, w in fresh]}
        assert _call(http, client, "POST", "/documents", json=body, headers=auth).status_code == 200
        client.live.update(fresh)
        words = " ".join(w for _, w in fresh)
        assert _found(http, client, words) == {i for i, _ in fresh}
    elif action == "upsert":
        doc_id, word = rng.choice(mine), client.word()
        old = client.live[doc_id]
        body = {"documents": [client.document(doc_id, word)], "upsert": True}
        assert _call(http, client, "POST", "/documents", json=body, headers=auth).status_code == 200
        client.live[doc_id] = word
        assert _found(http, client, word) == {doc_id} and not _found(http, client, old)
    elif action == "delete":
        doc_id = rng.choice(mine)
        assert _call(http, client, "DELETE", f"/documents/{doc_id}", headers=auth).status_code == 200
        word = client.live.pop(doc_id)
        assert not _found(http, client, word)
    elif action == "refused":
        doc_id = rng.choice(mine)
        body = {"documents": [client.document(doc_id, client.word())]}
        assert _call(http, client, "POST", "/documents", json=body, headers=auth).status_code == 409
        assert _call(http, client, "DELETE", f"/documents/{doc_id}x", headers=auth).status_code == 404
        assert _found(http, client, client.live[doc_id]) == {doc_id}
    else:
        query = {"query": " ".join(rng.sample(WORDS, 2)), "k": rng.randint(1, 20)}
        query["mode"] = rng.choice(["dense", "bm25", "hybrid"])
        assert _call(http, client, "POST", "/search", json=query).status_code == 200
    if client.operations % 15 == 0:
        check_owned(http, client, sample=20)


def hammer(url: str, clients: list[Client], seconds: float) -> list[str]:
    """Run every client on its own thread for ``seconds``; the failures (with each one's last requests)."""
    deadline, failures = time.monotonic() + seconds, []

    def run(client: Client) -> None:
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                while time.monotonic() < deadline:
                    step(http, client)
                check_owned(http, client)
        except Exception as exc:  # reported with the requests that led to it
            recent = "\n  ".join(client.log[-12:])
            failures.append(f"client {client.number} (seed {client.seed}): {exc!r}\n  {recent}")

    threads = [threading.Thread(target=run, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def run_lane(
    model: Path, folder: Path, seconds: float, seed: int, clients: int = 4, workers: int = 1
) -> dict:
    """Build a small index, serve it, hammer it, restart, check; returns counts (raises on a failure)."""
    start = [{"id": f"s{i}", "text": f"the {w}", "owner": "start"} for i, w in enumerate(WORDS)]
    Index.build(model, start, folder / "ix", hnsw=SETTINGS).close()
    args = [str(model), "--index", str(folder / "ix"), "--api-key-env", KEY_ENV, "--workers", str(workers)]
    team = [Client(n, seed * 100 + n) for n in range(clients)]
    with running(args, env={KEY_ENV: KEY}) as server:
        failures = hammer(server.url, team, seconds)
    assert not failures, "\n".join(failures)
    with running(args, env={KEY_ENV: KEY}) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        for client in team:
            check_owned(http, client)
        documents = http.get("/info").json()["index"]["documents"]
    assert documents == len(start) + sum(len(c.live) for c in team)
    statuses = sum((c.statuses for c in team), collections.Counter())
    return {"operations": sum(c.operations for c in team), "requests": sum(statuses.values()), **statuses}


def test_random_concurrent_writes_over_http_are_all_seen_and_survive_a_restart(tmp_path: Path) -> None:
    counts = run_lane(lane_model(tmp_path), tmp_path, seconds=5, seed=41, workers=2)
    assert counts["operations"] > 30 and counts[409] and counts[404]
