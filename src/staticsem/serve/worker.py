"""One thread for the model's work, so encoding never runs on the event loop.

Why not the thread pool (``run_in_threadpool``) the other routes use: a static model encodes a
sentence in tens of microseconds, less than a trip through a 40-thread pool costs, and under load
the pool's threads fight over the GIL (1,000 connections × 1 sentence: 477 requests/s through the
pool, about 3,800 with this thread; ``benchmarks/serve_load.py``). Here one thread takes the
requests in arrival order, runs each on its own (requests are not merged, so every answer is what
a lone request would get) and hands each answer back as soon as it is ready.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]
_Done = tuple["asyncio.Future[Any]", bool, Any]
_STOP = None


class ModelWorker:
    """A single worker thread running ``fn(*args)`` for coroutines that ``await worker.run(fn, ...)``."""

    def __init__(self, name: str = "staticsem-model") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        with self._lock:
            if not self.running:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Finish the queued jobs, then end the thread (a later ``run`` starts a new one)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._jobs.put(_STOP)
            thread.join(timeout)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the worker thread (started if need be); its exception is raised here."""
        if not self.running:
            self.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return await future

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            loop, future, fn, args = job
            if future.cancelled():  # the client went away while it waited
                continue
            try:
                outcome: _Done = (future, True, fn(*args))
            except BaseException as exc:  # handed to the awaiting coroutine, raised there
                outcome = (future, False, exc)
            try:  # each answer goes back as soon as it is ready: a slow request holds up no other
                loop.call_soon_threadsafe(_settle, outcome)
            except RuntimeError:  # the loop closed meanwhile: nobody waits for this answer
                logger.debug("dropped an answer for a closed event loop")


def _settle(outcome: _Done) -> None:
    future, ok, value = outcome
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
