"""Corpus reading in a child process, overlapped with the work on its sentences.

Decompressing, splitting lines into sentences, checking their length and de-duplicating them costs
about as much as counting or choosing words in them; ``background_sentences`` runs ``iter_sentences``
in a second process and hands its sentences over in chunks, so on two or more cores a corpus pass takes
the longer of the two halves instead of their sum. The order and content are exactly
``iter_sentences``'s; an error in the reader is raised here as the same one-line error.

The child is a fresh ``python -c`` that imports only this module (not ``multiprocessing``'s spawn, which
re-imports the parent's ``__main__``: impossible for a program read from stdin, and a re-run of a
script without a ``__main__`` guard). So programs run with ``-c``, from stdin, in a notebook or as a
script all read the same way; where no Python executable can be started (an embedded interpreter),
the corpus is read in this process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue as queues
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from typing import IO, Any

from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
from staticsem.errors import InputError, StaticsemError

logger = logging.getLogger(__name__)
CHUNK = 2048  # sentences per hand-over
DEPTH = 16  # chunks the reader may run ahead
READY = b'"ready"\n'
_BOOT = (
    "import json, sys; request = json.loads(sys.stdin.readline()); sys.path[:] = request['path']; "
    "from staticsem.distillation.corpus.prefetch import serve; serve(request)"
)


def serve(request: dict[str, Any]) -> None:
    """Child process: write ``"ready"``, then one JSON list of sentences per line, then ``null``; an
    error as ``{"error": kind, "message": ...}``."""
    out = sys.stdout.buffer
    try:
        out.write(READY)
        out.flush()
        _send(out, request)
        out.flush()
    except BrokenPipeError:  # the parent stopped reading
        return


def _send(out: IO[bytes], request: dict[str, Any]) -> None:
    given = request["options"]
    options = CorpusOptions(**{**given, **{k: tuple(given[k]) for k in ("languages", "exclude")}})
    try:
        batch: list[str] = []
        excluded: dict[str, int] = {}
        for sentence in iter_sentences(request["sources"], options, excluded):
            batch.append(sentence)
            if len(batch) == request["chunk"]:
                out.write(json.dumps(batch).encode() + b"\n")
                batch = []
        out.write(json.dumps(batch).encode() + b"\n")
        out.write(json.dumps({"excluded": excluded}).encode() + b"\nnull\n")
    except BrokenPipeError:
        raise
    except Exception as exc:  # handed to the parent, which raises it as one line
        kind = "input" if isinstance(exc, InputError) else "other"
        out.write(json.dumps({"error": kind, "message": str(exc)}).encode() + b"\n")


def python_executable() -> str | None:
    """The Python that runs this program, if it is one (an embedded interpreter's host is not)."""
    path = sys.executable
    if not path or not os.path.basename(path).lower().startswith("python"):
        return None
    return path


def background_sentences(
    sources: Sequence[str],
    options: CorpusOptions,
    *,
    chunk: int = CHUNK,
    excluded: dict[str, int] | None = None,
) -> Iterator[str]:
    """``iter_sentences(sources, options, excluded)``, read ahead in a child process where that can help.

    Reads in this process on one core, for stdin (``-``, which the child cannot read), without a
    Python executable to start, or when the child cannot start (with a warning).
    """
    python = python_executable()
    if (os.cpu_count() or 1) < 2 or "-" in sources or python is None:
        yield from iter_sentences(sources, options, excluded)
        return
    reader = subprocess.Popen(
        [python, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1 << 20
    )
    assert reader.stdin is not None and reader.stdout is not None
    lines: queues.Queue[bytes] = queues.Queue(maxsize=DEPTH)
    pump = threading.Thread(target=_pump, args=(reader.stdout, lines), daemon=True)
    try:
        request = {"sources": list(sources), "options": asdict(options), "chunk": chunk, "path": sys.path}
        reader.stdin.write(json.dumps(request).encode() + b"\n")
        reader.stdin.close()
        started = reader.stdout.readline() == READY
    except OSError:
        started = False
    if not started:
        code = reader.wait()
        logger.warning("the corpus reader process did not start (exit code %s); reading here", code)
        yield from iter_sentences(sources, options, excluded)
        return
    pump.start()
    try:
        while True:
            line = lines.get()
            if not line:
                code = reader.wait()
                raise StaticsemError(
                    f"the corpus reader process stopped (exit code {code}); its error is above"
                )
            item = json.loads(line)
            if item is None:
                reader.wait(timeout=10)  # it ends by itself after its last line
                return
            if isinstance(item, dict) and "excluded" in item:
                for source, count in item["excluded"].items():
                    if excluded is not None:
                        excluded[source] = excluded.get(source, 0) + count
                continue
            if isinstance(item, dict):
                raise (InputError if item["error"] == "input" else StaticsemError)(item["message"])
            yield from item
    finally:
        if reader.poll() is None:  # stopped early, or an error
            reader.terminate()
        reader.wait()
        while pump.is_alive():  # let the pump reach the end of the closed pipe
            with contextlib.suppress(queues.Empty):
                lines.get(timeout=0.1)
        reader.stdout.close()


def _pump(stream: IO[bytes], lines: queues.Queue[bytes]) -> None:
    """Thread: move the child's lines into ``lines`` (at most ``DEPTH`` ahead); ``b""`` at its end."""
    while True:
        line = stream.readline()
        lines.put(line)
        if not line:
            return
