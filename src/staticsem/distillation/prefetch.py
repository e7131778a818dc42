"""Corpus reading in a child process, overlapped with the work on its sentences.

Decompressing, splitting lines into sentences, checking their length and de-duplicating them costs
about as much as counting or choosing words in them; ``background_sentences`` runs ``iter_sentences``
in a second process and hands its sentences over in chunks, so on two or more cores a corpus pass takes
the longer of the two halves instead of their sum. The order and content are exactly
``iter_sentences``'s; an error in the reader is raised here as the same one-line error.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
from collections.abc import Iterator, Sequence
from typing import Any

from staticsem.distillation.corpus import CorpusOptions, iter_sentences
from staticsem.errors import InputError, StaticsemError

CHUNK = 2048  # sentences per hand-over
DEPTH = 16  # chunks the reader may run ahead


def _read(sources: list[str], options: CorpusOptions, out: Any, chunk: int) -> None:
    """Child process: put lists of sentences, then ``None``; an error as ``("error", kind, message)``."""
    try:
        batch: list[str] = []
        for sentence in iter_sentences(sources, options):
            batch.append(sentence)
            if len(batch) == chunk:
                out.put(batch)
                batch = []
        out.put(batch)
        out.put(None)
    except Exception as exc:  # handed to the parent, which raises it as one line
        out.put(("error", "input" if isinstance(exc, InputError) else "other", str(exc)))


def background_sentences(
    sources: Sequence[str], options: CorpusOptions, *, chunk: int = CHUNK
) -> Iterator[str]:
    """``iter_sentences(sources, options)``, read ahead in a child process where that can help.

    Falls back to reading in this process on one core or for stdin (``-``), which a child cannot read.
    """
    if (os.cpu_count() or 1) < 2 or "-" in sources:
        yield from iter_sentences(sources, options)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process holding torch threads
    channel = context.Queue(maxsize=DEPTH)
    reader = context.Process(target=_read, args=(list(sources), options, channel, chunk), daemon=True)
    reader.start()
    try:
        while True:
            try:
                item = channel.get(timeout=5)
            except queues.Empty:
                if not reader.is_alive():
                    raise StaticsemError(f"the corpus reader stopped (exit code {reader.exitcode})") from None
                continue
            if item is None:
                return
            if isinstance(item, tuple):
                _, kind, message = item
                raise (InputError if kind == "input" else StaticsemError)(message)
            yield from item
    finally:
        if reader.is_alive():
            reader.terminate()
        reader.join()
        channel.close()
