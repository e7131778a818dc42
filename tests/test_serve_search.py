"""The index endpoints (/search, /documents) against a tiny index built with ``Index.build``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import staticsem
from staticsem import search
from staticsem.serve import Limits, create_app

KEY = {"Authorization": "Bearer k"}
DOCS = [
    {"id": "d1", "text": "the cat sat on the mat", "topic": "pets"},
    {"id": "d2", "text": "the king and the queen of france", "topic": "royals"},
    {"id": "d3", "text": "a happy dog ran to the house", "topic": "pets"},
    {"id": "d4", "text": "a man and a woman in paris", "topic": "people"},
]


@pytest.fixture()
def index(saved_model: Path, tmp_path: Path) -> Iterator[object]:
    built = search.Index.build(saved_model, DOCS, tmp_path / "index")
    built.close()
    opened = search.Index.open(tmp_path / "index", model=staticsem.load(saved_model))
    yield opened
    opened.close()


@pytest.fixture()
def client(index) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    app = create_app(index.model, index=index, api_key="k", limits=Limits(max_inputs=3, max_k=50))
    with TestClient(app) as test_client:
        yield test_client


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_search_answers_what_the_index_answers(client: TestClient, index, mode: str) -> None:  # type: ignore[no-untyped-def]
    hits = client.post("/search", json={"query": "king queen", "k": 3, "mode": mode}).json()["hits"]
    expected = [hit.to_dict() for hit in index.search("king queen", 3, mode=mode)]
    assert [h["id"] for h in hits] == [h["id"] for h in expected]
    assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected])
    assert hits[0]["id"] == "d2" and hits[0]["metadata"] == {"topic": "royals"}


def test_search_filters_on_metadata(client: TestClient) -> None:
    hits = client.post("/search", json={"query": "the cat", "k": 10, "where": {"topic": "pets"}}).json()[
        "hits"
    ]
    assert {h["id"] for h in hits} <= {"d1", "d3"} and hits


def test_documents_are_added_replaced_and_deleted(client: TestClient) -> None:
    new = {"documents": [{"id": "d5", "text": "a queen in paris", "metadata": {"topic": "royals"}}]}
    assert client.post("/documents", json=new, headers=KEY).json() == {"changed": 1, "documents": 5}
    hits = client.post("/search", json={"query": "queen paris", "k": 2, "mode": "bm25"}).json()["hits"]
    assert "d5" in [h["id"] for h in hits]
    assert client.post("/documents", json=new, headers=KEY).status_code == 409  # duplicate id
    assert client.post("/documents", json={**new, "upsert": True}, headers=KEY).json()["documents"] == 5
    assert client.delete("/documents/d5", headers=KEY).json() == {"changed": 1, "documents": 4}
    assert client.delete("/documents/d5", headers=KEY).status_code == 404
    assert client.get("/info").json()["index"]["documents"] == 4


def test_document_writes_keep_the_rules(client: TestClient) -> None:
    reserved = {"documents": [{"text": "x", "metadata": {"id": "y"}}]}
    assert "reserved" in client.post("/documents", json=reserved, headers=KEY).json()["error"]["message"]
    too_many = {"documents": [{"text": "x"}] * 4}
    assert client.post("/documents", json=too_many, headers=KEY).json()["error"]["limit"] == "max_inputs"
    assert client.post("/documents", json={"documents": [{"text": "x"}]}).status_code == 401
    assert client.get("/info").json()["writes"] is True


def test_a_write_is_answered_while_every_search_thread_and_slot_is_taken(index, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The write lane: searches stuck on both search threads, with more queued for their slots, hold up
    neither a write's slot nor its thread; searches never run on more than ``search_threads`` threads."""
    import asyncio
    import threading

    import httpx

    from staticsem.serve.service import Service

    gate, busy, peak = threading.Event(), [0], [0]
    lock = threading.Lock()
    original = Service.search

    def slow_search(self: Service, request: object) -> object:
        with lock:
            busy[0] += 1
            peak[0] = max(peak[0], busy[0])
        gate.wait(10)
        with lock:
            busy[0] -= 1
        return original(self, request)  # type: ignore[arg-type]

    monkeypatch.setattr(Service, "search", slow_search)
    limits = Limits(max_in_flight=3, search_threads=2)
    app = create_app(index.model, index=index, api_key="k", limits=limits)

    async def main() -> tuple[int, list[int]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            query = {"query": "king", "k": 2}
            searches = [asyncio.ensure_future(client.post("/search", json=query)) for _ in range(6)]
            await asyncio.sleep(0.2)
            new = {"documents": [{"id": "w1", "text": "a queen in paris"}]}
            write = await asyncio.wait_for(client.post("/documents", json=new, headers=KEY), 5)
            gate.set()
            return write.status_code, [s.status_code for s in await asyncio.gather(*searches)]

    write_status, search_statuses = asyncio.run(main())
    assert write_status == 200 and search_statuses == [200] * 6
    assert peak[0] == 2
    app.state.lanes.close()
