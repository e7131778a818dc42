"""How the server shares its work: the model thread (answers, errors, order, cancellation, a free
event loop) and the cap on requests answered at once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from staticsem.model import StaticModel
from staticsem.serve import create_app
from staticsem.serve.guard import InFlight
from staticsem.serve.worker import ModelWorker


def run(coroutine_fn: Callable[[ModelWorker], Any]) -> Any:
    worker = ModelWorker()
    try:
        return asyncio.run(coroutine_fn(worker))
    finally:
        worker.stop(timeout=5)


def test_results_come_back_and_errors_are_raised_in_the_caller() -> None:
    def fails() -> None:
        raise ValueError("no")

    async def main(worker: ModelWorker) -> None:
        assert await worker.run(pow, 2, 10) == 1024
        with pytest.raises(ValueError, match="no"):
            await worker.run(fails)
        assert await worker.run(len, "still serving") == 13

    run(main)


def test_work_runs_on_one_thread_that_is_not_the_loops() -> None:
    async def main(worker: ModelWorker) -> set[int]:
        loop_thread = threading.get_ident()
        seen = set(await asyncio.gather(*(worker.run(threading.get_ident) for _ in range(50))))
        assert loop_thread not in seen
        return seen

    assert len(run(main)) == 1


def test_an_answer_is_not_held_behind_a_slow_request_queued_after_it() -> None:
    gate = threading.Event()

    async def main(worker: ModelWorker) -> bool:
        first = asyncio.ensure_future(worker.run(gate.wait, 10))
        await asyncio.sleep(0.05)  # the worker is now blocked in the first job
        quick = asyncio.ensure_future(worker.run(int, 7))
        slow = asyncio.ensure_future(worker.run(time.sleep, 1.0))
        await asyncio.sleep(0.01)
        gate.set()
        assert await quick == 7
        answered_first = not slow.done()  # ordering, not a wall-clock limit
        await asyncio.gather(first, slow)
        return answered_first

    assert run(main)


def test_a_cancelled_request_is_skipped_and_stop_finishes_the_queue() -> None:
    gate, ran = threading.Event(), []

    async def main(worker: ModelWorker) -> None:
        first = asyncio.ensure_future(worker.run(gate.wait, 10))
        await asyncio.sleep(0.05)
        gone = asyncio.ensure_future(worker.run(ran.append, "cancelled"))
        kept = asyncio.ensure_future(worker.run(ran.append, "kept"))
        await asyncio.sleep(0.01)
        gone.cancel()
        gate.set()
        await asyncio.gather(first, kept)

    run(main)
    assert ran == ["kept"]

    worker, gate2 = ModelWorker(), threading.Event()

    async def queue_then_stop() -> list[Any]:
        jobs = [asyncio.ensure_future(worker.run(gate2.wait, 10))]
        await asyncio.sleep(0.05)
        jobs += [asyncio.ensure_future(worker.run(ran.append, i)) for i in range(5)]
        await asyncio.sleep(0.01)
        stopping = asyncio.get_running_loop().run_in_executor(None, worker.stop, 5)
        gate2.set()
        await stopping
        return list(await asyncio.gather(*jobs))

    assert asyncio.run(queue_then_stop()) == [True, None, None, None, None, None]
    assert ran == ["kept", 0, 1, 2, 3, 4]
    assert not worker.running


class SlowModel:
    """A model whose encode takes a while (as a long request's does); ``finished`` is set when it returns."""

    dim = 4

    def __init__(self) -> None:
        self.started, self.finished = threading.Event(), threading.Event()

    def encode(self, texts: list[str]) -> np.ndarray:
        self.started.set()
        time.sleep(1.0)
        self.finished.set()
        return np.tile(np.float32(0.5), (len(texts), 4))


def test_the_event_loop_answers_while_a_slow_encode_runs() -> None:
    """Ordering, not wall-clock limits (a cold clean clone imports slowly): /health is answered while the
    encode is still running, so the encode does not hold the event loop."""
    model = SlowModel()

    async def main() -> bool:
        app = create_app(model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            slow = asyncio.ensure_future(client.post("/v1/embeddings", json={"input": "a long text"}))
            for _ in range(1000):  # at most 10 s
                if model.started.is_set() or slow.done():
                    break
                await asyncio.sleep(0.01)
            assert model.started.is_set(), "the encode never started"
            health = await client.get("/health")
            answered_during_encode = not model.finished.is_set()
            assert health.status_code == 200
            answer = await slow
            assert answer.status_code == 200, answer.text
            return answered_during_encode

    assert asyncio.run(main())


def test_the_served_model_answers_as_it_does_in_process(tiny_model: StaticModel) -> None:
    async def main() -> list[list[float]]:
        transport = httpx.ASGITransport(app=create_app(tiny_model))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            answers = await asyncio.gather(
                *(client.post("/v1/embeddings", json={"input": [f"word{i} text"]}) for i in range(20))
            )
        return [answer.json()["data"][0]["embedding"] for answer in answers]

    rows = np.asarray(asyncio.run(main()), dtype=np.float32)
    expected = tiny_model.encode([f"word{i} text" for i in range(20)])
    np.testing.assert_allclose(rows, expected, atol=1e-6)


def test_at_most_max_in_flight_requests_are_answered_at_once_and_the_rest_wait() -> None:
    busy = peak = 0

    async def handler(scope: Any, receive: Any, send: Any) -> None:
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        await asyncio.sleep(0.01)
        busy -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=InFlight(handler, limit=3))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return list(await asyncio.gather(*(client.get(f"/r{i}") for i in range(20))))

    answers = asyncio.run(main())
    assert [a.text for a in answers] == [f"/r{i}" for i in range(20)]
    assert peak == 3


def test_health_answers_while_every_slot_is_taken() -> None:
    async def main() -> str:
        gate = asyncio.Event()

        async def handler(scope: Any, receive: Any, send: Any) -> None:
            if scope["path"] != "/health":
                await gate.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": scope["path"].encode()})

        transport = httpx.ASGITransport(app=InFlight(handler, limit=1))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            held = asyncio.ensure_future(client.get("/slow"))
            await asyncio.sleep(0.01)
            health = await asyncio.wait_for(client.get("/health"), 2)
            gate.set()
            await held
            return health.text

    assert asyncio.run(main()) == "/health"
