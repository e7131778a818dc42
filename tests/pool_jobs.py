"""Jobs for the worker pool's tests (``workers.Pool``): light to import, as a worker process imports them."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from staticsem.distillation.workers import Message
from staticsem.errors import InputError


def sum_setup(params: dict[str, Any]) -> dict[str, Any]:
    """The job's state: its scale."""
    return {"scale": params["scale"]}


def slow_sum(state: dict[str, Any], message: Message) -> Message:
    """``scale`` times the sum of ``x`` (slower for odd counts, so results finish out of order); a negative
    count is a user's error, ``exit`` ends the process with that exit code (0: a clean exit)."""
    count = message.meta["n"]
    if "exit" in message.meta:
        os._exit(message.meta["exit"])
    if count < 0:
        raise InputError(f"a negative count: {count}")
    if count % 2:
        time.sleep(0.01)
    x = message.arrays.get("x", np.arange(count))
    return Message({"sum": int(state["scale"] * x.sum())})


def stamp(state: Any, message: Message) -> Message:
    """Sleep ``sleep`` seconds, then say when (the system's monotonic clock) and in which process."""
    time.sleep(message.meta.get("sleep", 0))
    return Message({"at": time.monotonic(), "pid": os.getpid()})
