"""Work spread over processes: ``Pool`` runs one job function on a stream of messages in ``python -c``
children and hands the results back in the order given (``--workers``, default every core).

A message is JSON-able ``meta`` plus named numpy ``arrays`` and ``bytes`` blobs, framed over the children's
pipes (a length-prefixed JSON header, then the raw buffers): nothing is pickled. Each child imports only the
job's module (never the parent's ``__main__``, as ``multiprocessing``'s spawn would: impossible for a program
read from stdin, and a re-run of a script without a ``__main__`` guard), calls its ``setup(params)`` once and
then ``job(state, message)`` for every message it gets. Message ``i`` goes to child ``i % workers``; a
thread per child writes its messages and another reads its results, so the parent never blocks on a full
pipe. An error in a job comes back as the same one-line error; a child that dies is an error naming it.
With one worker (or where no Python executable can be started) the job runs in this process: the same
functions, no children.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import json
import logging
import os
import queue as queues
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from staticsem.errors import InputError, StaticsemError

logger = logging.getLogger(__name__)
AHEAD = 3  # messages in flight per child
PIPE_BYTES = 1 << 20  # a child's pipes' capacity (Linux allows 1 MiB to any process by default)
_BOOT = (
    "import json, sys; boot = json.loads(sys.stdin.buffer.readline()); sys.path[:] = boot['path']; "
    "from staticsem.distillation.workers import serve; serve(boot)"
)
_LENGTH = struct.Struct("<Q")


@dataclass
class Message:
    """What goes to a job and comes back: JSON-able ``meta``, named arrays and byte blobs."""

    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


Job = Callable[[Any, Message], Message]


def default_workers() -> int:
    """Every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_workers(workers: int | None) -> int:
    """``workers`` (``None``: every core), or ``InputError`` for fewer than one."""
    if workers is None:
        return default_workers()
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    return workers


def resolve(name: str) -> Callable[..., Any]:
    """The function ``module:function``."""
    module, _, function = name.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return found


# ------------------------------------------------------------------ framing
def join_bytes(items: Sequence[bytes]) -> tuple[bytes, np.ndarray]:
    """``items`` as one blob and the ``len(items) + 1`` offsets where each starts (the last: the end)."""
    starts = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(item) for item in items], out=starts[1:])
    return b"".join(items), starts


def split_bytes(blob: bytes, starts: np.ndarray) -> list[bytes]:
    """The items ``join_bytes`` joined."""
    bounds = starts.tolist()
    return [blob[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def write_message(out: IO[bytes], message: Message, error: dict[str, str] | None = None) -> None:
    """One frame: the header's length and JSON (meta, array dtypes and shapes, blob names), then buffers."""
    arrays = {name: np.ascontiguousarray(array) for name, array in message.arrays.items()}
    header = {
        "meta": message.meta,
        "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()],
        "blobs": list(message.blobs),
        **({"error": error} if error else {}),
    }
    encoded = json.dumps(header).encode()
    out.write(_LENGTH.pack(len(encoded)) + encoded)
    for array in arrays.values():
        out.write(_LENGTH.pack(array.nbytes))
        out.write(array.tobytes() if not array.flags.c_contiguous else array.data.cast("B"))
    for blob in message.blobs.values():
        out.write(_LENGTH.pack(len(blob)) + blob)
    out.flush()


def _exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def read_message(stream: IO[bytes]) -> tuple[Message, dict[str, str] | None]:
    """A frame written by ``write_message`` (``EOFError`` at the end of the stream)."""
    (size,) = _LENGTH.unpack(_exactly(stream, _LENGTH.size))
    header = json.loads(_exactly(stream, size))
    message = Message(header["meta"])
    for name, dtype, shape in header["arrays"]:
        (nbytes,) = _LENGTH.unpack(_exactly(stream, _LENGTH.size))
        data = bytearray(_exactly(stream, nbytes))  # writable, as arrays made here are
        message.arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
    for name in header["blobs"]:
        (nbytes,) = _LENGTH.unpack(_exactly(stream, _LENGTH.size))
        message.blobs[name] = _exactly(stream, nbytes)
    return message, header.get("error")


# ------------------------------------------------------------------ the child
def serve(boot: dict[str, Any]) -> None:
    """A child's loop: set up once, then answer every message on stdin with one on stdout until EOF."""
    source, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        state = resolve(boot["setup"])(boot["params"]) if boot.get("setup") else None
        job: Job = resolve(boot["job"])
        write_message(out, Message({"ready": True}))
        while True:
            try:
                message, _ = read_message(source)
            except EOFError:
                return
            try:
                result = job(state, message)
            except Exception as exc:  # handed to the parent, which raises it as one line
                write_message(out, Message(), _error(exc))
                continue
            write_message(out, result)
    except BrokenPipeError:  # the parent stopped reading
        return
    except Exception as exc:  # the setup failed
        with contextlib.suppress(BrokenPipeError):
            write_message(out, Message(), _error(exc))


def _error(exc: Exception) -> dict[str, str]:
    return {"kind": "input" if isinstance(exc, InputError) else "other", "message": str(exc)}


def _raise(error: dict[str, str]) -> None:
    raise (InputError if error["kind"] == "input" else StaticsemError)(error["message"])


def python_executable() -> str | None:
    """The Python that runs this program, if it is one (an embedded interpreter's host is not)."""
    path = sys.executable
    if not path or not os.path.basename(path).lower().startswith("python"):
        return None
    return path


# ------------------------------------------------------------------ the parent
def _widen_pipe(pipe: IO[bytes]) -> None:
    """Let ``pipe`` hold ``PIPE_BYTES`` (Linux; elsewhere as it is): a batch crosses in a few reads, not in
    one per 64 KiB, each waiting for the interpreter lock that the parent's main thread holds."""
    with contextlib.suppress(ImportError, AttributeError, OSError):  # no fcntl, no F_SETPIPE_SZ, refused
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


class _Child:
    """One child process, the thread that writes its messages (a pipe holds 64 KiB: a busy child must never
    hold up the parent, which feeds the others meanwhile) and the thread that reads its results."""

    def __init__(self, python: str, boot: dict[str, Any], name: str = "a worker") -> None:
        self.name = name  # in errors: which of the pool's processes it is
        # the processes are the parallelism: each child's tokenizers run on one thread unless told otherwise
        env = {"RAYON_NUM_THREADS": "1", **os.environ}
        self.process = subprocess.Popen(
            [python, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1 << 20, env=env
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        for pipe in (self.stdin, self.stdout):
            _widen_pipe(pipe)
        self.results: queues.Queue[tuple[Message, dict[str, str] | None] | None] = queues.Queue()
        self.outbox: queues.Queue[Message | None] = queues.Queue()
        self.stdin.write(json.dumps(boot).encode() + b"\n")
        self.stdin.flush()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.reader.start()
        self.writer.start()

    def send(self, message: Message) -> None:
        """Queue ``message`` for the child (written by the writer thread)."""
        self.outbox.put(message)

    def _write(self) -> None:
        while (message := self.outbox.get()) is not None:
            try:
                write_message(self.stdin, message)
            except (OSError, ValueError):  # the child stopped: its reader reports it
                return

    def _read(self) -> None:
        while True:
            try:
                self.results.put(read_message(self.stdout))
            except (EOFError, OSError, ValueError):
                self.results.put(None)
                return

    def result(self) -> Message:
        got = self.results.get()
        if got is None:
            code = self.process.wait()
            raise StaticsemError(
                f"{self.name} (pid {self.process.pid}) stopped before it answered (exit code {code}); "
                "its error, if any, is above"
            )
        message, error = got
        if error is not None:
            _raise(error)
        return message

    def close(self, now: bool = False) -> None:
        """End the process: at the end of its input, or (``now``) at once."""
        if now:
            self.process.kill()
        self.outbox.put(None)  # after what is queued, unless the child is gone
        self.writer.join(timeout=10)
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)
        self.stdout.close()


class Pool:
    """``job`` (``"module:function"``, called as ``job(state, message)``) over messages in ``workers``
    processes, results in order; ``setup`` (``"module:function"``) makes each process's ``state`` from
    ``params`` (JSON-able) once.

    :param workers: processes; 1 (or no Python executable to start) runs the job here.
    """

    def __init__(self, job: str, params: Any = None, *, setup: str | None = None, workers: int = 1) -> None:
        self.boot = {"job": job, "setup": setup, "params": params, "path": sys.path}
        python = python_executable() if workers > 1 else None
        self.children: list[_Child] = []
        if python is None:
            self.state = resolve(setup)(params) if setup else None
            self.job: Job = resolve(job)
            return
        try:
            self.children = [
                _Child(python, self.boot, f"worker process {number} of {workers}")
                for number in range(1, workers + 1)
            ]
            for child in self.children:
                child.result()  # "ready", or the setup's error
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        """Processes doing the work (1: this one)."""
        return max(1, len(self.children))

    def map(self, messages: Iterable[Message]) -> Iterator[Message]:
        """The job's result for each message, in order (``AHEAD`` in flight per process)."""
        if not self.children:
            for message in messages:
                yield self.job(self.state, message)
            return
        sent: collections.deque[_Child] = collections.deque()
        try:
            for count, message in enumerate(messages):
                child = self.children[count % len(self.children)]
                child.send(message)
                sent.append(child)
                if len(sent) >= AHEAD * len(self.children):
                    yield sent.popleft().result()
            while sent:
                yield sent.popleft().result()
        finally:  # stopped early (or an error): the processes are of no further use
            if sent:
                self.close(now=True)

    def close(self, now: bool = False) -> None:
        """Stop the processes: each at the end of its input, or (``now``) at once."""
        for child in self.children:
            child.close(now)
        self.children = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
