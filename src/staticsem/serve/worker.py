"""One thread for the model's work, so encoding never runs on the event loop.

Why not the thread pool (``run_in_threadpool``) the other routes use: a static model encodes a
sentence in tens of microseconds, less than a trip through a 40-thread pool costs. Under load the
pool's threads wake one per request and fight over the GIL, and each result wakes the loop on its
own. Here one thread takes every request waiting in its queue at each wake-up, runs them one after
another (each request's texts are encoded on their own: requests are not merged, so every answer
is what a lone request would get), and hands the finished group back to the loop in one call.
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
            jobs = [self._jobs.get()]
            while True:  # everything already waiting goes in this round
                try:
                    jobs.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            done: dict[asyncio.AbstractEventLoop, list[_Done]] = {}
            for job in jobs:
                if job is _STOP:
                    continue
                loop, future, fn, args = job
                if future.cancelled():  # the client went away while it waited
                    continue
                try:
                    outcome: _Done = (future, True, fn(*args))
                except BaseException as exc:  # handed to the awaiting coroutine, raised there
                    outcome = (future, False, exc)
                done.setdefault(loop, []).append(outcome)
            for loop, outcomes in done.items():
                try:
                    loop.call_soon_threadsafe(_settle, outcomes)
                except RuntimeError:  # the loop closed meanwhile: nobody waits for these answers
                    logger.debug("dropped %d answers for a closed event loop", len(outcomes))
            if any(job is _STOP for job in jobs):
                return


def _settle(outcomes: list[_Done]) -> None:
    for future, ok, value in outcomes:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
