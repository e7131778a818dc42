"""Stage 1, contextual extraction: each vocabulary word's mean last-layer state over its occurrences.

One teacher pass over a sentence yields every vocabulary word in it (states averaged over the word's
subword tokens, then over occurrences) and the teacher's own sentence embedding, kept as the
knowledge-distillation target. The work per batch is split so the teacher never waits:

* the batches are planned first, the sentences sorted by the teacher's token count: ``batch_size`` of them
  on the CPU, a token budget on a GPU (less padding: the forward 1.53× faster on 2 cores than batches
  sorted by characters; the int8 teacher's per-batch activation scales see other neighbours, so a CPU
  build differs from one planned by characters in rounding, its quality the same: docs/benchmarks);
* each batch is made ready ahead (``teachers.batches``: tokenised, each vocabulary word's tokens located) in
  a thread, or in worker processes where there are cores to spare;
* the teacher's states stay where they are made: the per-word sums and counts and the sentence means are
  reduced on the teacher's device, so only reduced vectors reach the host;
* a GPU out of memory halves the batch and retries it (said in the log).

Partial sums are saved every few minutes, so an interrupted run (even kill -9) resumes at the last saved
batch; a partial made by another batch plan (another device) is not resumed.
"""

from __future__ import annotations

import contextlib
import logging
import queue as queues
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.teachers.batches import Prepared, occurrences, request
from staticsem.distillation.workers import Message, Pool
from staticsem.io.atomic import save_tensors
from staticsem.text import BUILTIN_SPLITTERS, WordSplitter

logger = logging.getLogger(__name__)
AHEAD = 4  # batches made ready ahead of the teacher


@dataclass
class Extraction:
    """Stage-1 result: summed states and occurrence counts per word, per-sentence teacher outputs."""

    sums: np.ndarray  # V × H
    counts: np.ndarray  # V
    embeddings: np.ndarray  # N × D, in the order of the sentences given
    passes: int
    token_means: np.ndarray | None = None  # N × H float16, the mean of each sentence's own token states

    def vectors(self) -> np.ndarray:
        """Mean state per word (zero rows for words never seen)."""
        return (self.sums / np.maximum(self.counts, 1)[:, None]).astype(np.float32)


# Per-sentence outputs of a teacher pass: the teacher's (normalised) sentence embedding, the KD target;
# and the plain mean of the sentence's own token states (no [CLS]/[SEP]), tokenlearn's target
PER_SENTENCE = {"embeddings": np.float32, "token_means": np.float16}


class SentenceRows:
    """Per-sentence outputs for ``count`` sentences, filled batch by batch in any order."""

    def __init__(self, count: int, saved: dict[str, np.ndarray] | None = None) -> None:
        self.count = count
        self.arrays = dict(saved or {})
        # a run resumed from a partial without some output (an older format) goes on without it
        self.closed = bool(saved) and bool(set(PER_SENTENCE) - set(self.arrays))

    def put(self, rows: np.ndarray, found: dict[str, np.ndarray]) -> None:
        """Store one batch's outputs at sentence rows ``rows``."""
        for key, value in found.items():
            if key not in self.arrays:
                if self.closed:
                    continue
                self.arrays[key] = np.zeros((self.count, value.shape[1]), PER_SENTENCE[key])
            self.arrays[key][rows] = value

    def result(self, sums: torch.Tensor, counts: torch.Tensor) -> Extraction:
        """The finished extraction."""
        embeddings = self.arrays.get("embeddings", np.zeros((self.count, 0), np.float32))
        return Extraction(
            sums.cpu().numpy(), counts.cpu().numpy(), embeddings, self.count, self.arrays.get("token_means")
        )


# ------------------------------------------------------------------ batch plans
def length_batches(
    sentences: Sequence[str], batch_size: int, lengths: np.ndarray | None = None
) -> list[np.ndarray]:
    """Sentence indices in batches of ``batch_size`` sorted by ``lengths`` (the teacher's token counts; by
    default the sentences' characters): less padding."""
    if lengths is None:
        lengths = np.array([len(s) for s in sentences], np.int64)
    order = np.argsort(lengths, kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def token_batches(tokens: np.ndarray, budget: int) -> list[np.ndarray]:
    """Sentence indices sorted by token count, cut so that each batch's padded size (sentences × its longest)
    stays within ``budget`` tokens (a longer sentence goes alone)."""
    order = np.argsort(tokens, kind="stable")
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end + 1 - start) * int(tokens[order[end]]) > budget:
            batches.append(order[start:end])
            start = end
    return batches


def plan_batches(
    teacher: Any, sentences: Sequence[str], batch_size: int, batch_tokens: int | None = None
) -> list[np.ndarray]:
    """The batches ``teacher`` reads ``sentences`` in: ``batch_size`` sentences sorted by the teacher's token
    count on the CPU (by characters for a teacher that cannot count); on a GPU (``batch_tokens`` given) a
    token budget. Characters left 1.43× the tokens padded on Wikipedia's sentences, token counts 1.00×."""
    counts = getattr(teacher, "token_counts", None)
    if counts is None:
        return length_batches(sentences, batch_size)
    if batch_tokens is None:
        return length_batches(sentences, batch_size, counts(sentences))
    return token_batches(counts(sentences), batch_tokens)


def plan_key(plan: Sequence[np.ndarray]) -> str:
    """A short hash of a batch plan (a saved partial is resumed only under the same plan)."""
    sizes = [str(len(batch)) for batch in plan]
    order = np.concatenate(plan).astype(np.int64).tobytes() if plan else b""
    return fingerprint({"order": order.hex()[:4096], "n": len(order)}, sizes)


# ------------------------------------------------------------------ the reduction (on the teacher's device)
def reduce_batch(
    states: torch.Tensor,
    own: torch.Tensor,
    located: tuple[np.ndarray, np.ndarray, np.ndarray],
    sums: torch.Tensor,
    counts: torch.Tensor,
) -> torch.Tensor:
    """Add a batch's word occurrences to ``sums``/``counts`` and return its sentences' own-token means, all on
    the device of ``states``: each occurrence's tokens averaged, each word's occurrences summed.

    ``located``: (flat token positions, their occurrence numbers, each occurrence's vocabulary row).
    """
    positions, occurrence_of, words = (torch.from_numpy(a).to(states.device) for a in located)
    if len(words):
        flat = states.reshape(-1, states.shape[-1])[positions].float()
        occurrence = torch.zeros(len(words), flat.shape[1], device=flat.device).index_add_(
            0, occurrence_of, flat
        )
        pieces = torch.zeros(len(words), dtype=torch.int64, device=flat.device)
        pieces = pieces.index_add_(0, occurrence_of, torch.ones_like(occurrence_of)).clamp(min=1)
        sums.index_add_(0, words, occurrence / pieces[:, None])
        counts.index_add_(0, words, torch.ones_like(words))
    mask = own.to(states.device).unsqueeze(-1).to(torch.float32)
    return (states.float() * mask).sum(1) / mask.sum(1).clamp(min=1)


def zero_sums(
    words: int, width: int, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty per-word state sums (words × width) and occurrence counts."""
    return torch.zeros(words, width, device=device), torch.zeros(words, dtype=torch.int64, device=device)


# ------------------------------------------------------------------ one batch through the teacher
@dataclass
class _Batch:
    """A planned batch: its sentence numbers and texts, and (a real teacher's) prepared inputs."""

    rows: np.ndarray
    texts: list[str]
    prepared: Prepared | None = None


def _oom() -> tuple[type[BaseException], ...]:
    error = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (error,) if error is not None else ()


class _Pass:
    """Runs batches through ``teacher`` and reduces them into ``sums``/``counts`` on its device."""

    def __init__(
        self,
        teacher: Any,
        index: dict[str, int],
        lowercase: bool,
        splitter: WordSplitter | None,
        layer: int | None,
    ) -> None:
        self.splitter = splitter or WordSplitter()
        self.teacher, self.index, self.lowercase, self.layer = teacher, index, lowercase, layer
        # a real teacher's batch preparer for the vocabulary (a teacher that tokenises itself in
        # ``forward``, such as the tests' fake, has none)
        make: Callable[..., Any] | None = getattr(teacher, "preparer", None)
        self.preparer = None if make is None else make(list(index), lowercase, self.splitter)

    def __call__(self, batch: _Batch, sums: torch.Tensor, counts: torch.Tensor) -> dict[str, np.ndarray]:
        """The batch's per-sentence outputs (its word states added to ``sums``/``counts``); a GPU out of
        memory halves it and retries each half."""
        try:
            states, own, located, sentence = self._forward(batch)
        except _oom() as exc:
            if len(batch.rows) < 2:
                raise
            del exc
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            half = len(batch.rows) // 2
            logger.warning(
                "the GPU ran out of memory on a batch of %d sentences: halving it and retrying",
                len(batch.rows),
            )
            parts = [
                _Batch(batch.rows[:half], batch.texts[:half]),
                _Batch(batch.rows[half:], batch.texts[half:]),
            ]
            found = [self(self.ready(part), sums, counts) for part in parts]
            return {key: np.concatenate([f[key] for f in found]) for key in found[0]}
        means = reduce_batch(states, own, located, sums, counts)
        return {
            "embeddings": sentence.float().cpu().numpy(),
            "token_means": means.cpu().numpy().astype(np.float16),
        }

    def ready(self, batch: _Batch) -> _Batch:
        """``batch`` prepared for the teacher (a real teacher's: tokenised and located here)."""
        if self.preparer is not None and batch.prepared is None:
            batch.prepared = self.preparer(batch.texts, batch.rows)
        return batch

    def _forward(self, batch: _Batch) -> tuple[torch.Tensor, torch.Tensor, Any, torch.Tensor]:
        prepared = self.ready(batch).prepared
        if prepared is not None:
            states, sentence = self.teacher.run(prepared.inputs, self.layer)
            located = (prepared.positions, prepared.occurrence_of, prepared.words)
            return states, torch.from_numpy(prepared.own), located, sentence
        out = self.teacher.forward(batch.texts, self.layer)  # a teacher that tokenises itself
        located = occurrences(
            batch.texts, out.offsets.numpy(), out.own.numpy(), self.index, self.lowercase, self.splitter
        )
        return out.states, out.own, located, out.sentence


# ------------------------------------------------------------------ batches made ready ahead
@contextlib.contextmanager
def ahead(planned: Iterator[_Batch], run: _Pass, workers: int) -> Iterator[Iterator[_Batch]]:
    """``planned`` batches made ready in a thread ahead of the teacher (by ``workers`` processes when more
    than one), at most ``AHEAD`` at a time."""
    ready: queues.Queue[Any] = queues.Queue(maxsize=AHEAD)
    stop = threading.Event()
    pool = None
    if workers > 1 and run.preparer is not None and run.preparer.splitter in BUILTIN_SPLITTERS:
        pool = Pool(
            "staticsem.distillation.teachers.batches:job",
            run.preparer.params(),
            setup="staticsem.distillation.teachers.batches:setup",
            workers=workers,
        )

    def made() -> Iterator[_Batch]:
        if pool is None:
            yield from (run.ready(batch) for batch in planned)
            return
        batches: list[_Batch] = []

        def messages() -> Iterator[Message]:
            for batch in planned:
                batches.append(batch)
                yield request(batch.texts, batch.rows)

        for message in pool.map(messages()):
            batch = batches.pop(0)
            batch.prepared = Prepared.from_message(message)
            yield batch

    def fill() -> None:
        try:
            for batch in made():
                while not stop.is_set():
                    with contextlib.suppress(queues.Full):
                        ready.put(batch, timeout=0.1)
                        break
                if stop.is_set():
                    return
            ready.put(None)
        except BaseException as exc:  # raised where the batches are read
            ready.put(exc)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()

    def read() -> Iterator[_Batch]:
        while (item := ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    try:
        yield read()
    finally:
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(queues.Empty):
                ready.get(timeout=0.1)
        if pool is not None:
            pool.close(now=True)


# ------------------------------------------------------------------ checkpoints
def save_partial(
    path: Path,
    sums: torch.Tensor,
    counts: torch.Tensor,
    rows: dict[str, np.ndarray],
    done: int,
    plan: str = "",
) -> None:
    """Save running sums, counts, per-sentence outputs, the number of finished batches and the plan's key."""
    arrays = {
        "sums": sums.cpu().numpy(),
        "counts": counts.cpu().numpy(),
        "done": np.array([done], np.int64),
        "plan": np.frombuffer(plan.encode(), np.uint8),
    }
    save_tensors(path, {**arrays, **rows})


def resume(
    checkpoint: Path, batches: int, plan: str = ""
) -> tuple[torch.Tensor, torch.Tensor, dict[str, np.ndarray], int] | None:
    """Sums, counts, per-sentence outputs and finished batches saved in a stage-1 checkpoint; None when it
    was made under another batch plan."""
    saved = load_file(str(checkpoint))
    made = saved.pop("plan", np.zeros(0, np.uint8)).tobytes().decode()
    if made and plan and made != plan:
        logger.warning("%s was made with other batches (another device): stage 1 starts over", checkpoint)
        return None
    done = int(saved.pop("done")[0])
    logger.info("resuming stage 1 after batch %d of %d", done, batches)
    sums, counts = torch.from_numpy(saved.pop("sums")), torch.from_numpy(saved.pop("counts"))
    return sums, counts, saved, done


# ------------------------------------------------------------------ the step
def accumulate(
    teacher: Any,
    texts: Sequence[str],
    index: dict[str, int],
    sums: torch.Tensor,
    counts: torch.Tensor,
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> dict[str, np.ndarray]:
    """One teacher pass over ``texts``: add their words' states to ``sums``/``counts``; return the
    per-sentence outputs (``PER_SENTENCE``) of ``texts``."""
    run = _Pass(teacher, index, lowercase, splitter, layer)
    return run(_Batch(np.arange(len(texts)), list(texts)), sums, counts)


def extract_shard(
    teacher: Any,
    batches: Sequence[Sequence[str]],
    index: dict[str, int],
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> dict[str, np.ndarray]:
    """Stage 1 over a shard of batches: the words it saw (``ids``), their ``sums`` and ``counts``,
    and the per-sentence outputs in batch order (what a scale-out worker returns)."""
    device = getattr(teacher, "device", "cpu")
    sums, counts = zero_sums(len(index), teacher.hidden_size, device)
    run = _Pass(teacher, index, lowercase, splitter, layer)
    starts = np.cumsum([0] + [len(b) for b in batches])
    found = []
    with ahead(
        (_Batch(np.arange(a, b), list(t)) for a, b, t in zip(starts, starts[1:], batches, strict=False)),
        run,
        1,
    ) as ready:
        found = [run(batch, sums, counts) for batch in ready]
    ids = torch.nonzero(counts).flatten()
    rows = {key: np.concatenate([f[key] for f in found]).astype(kind) for key, kind in PER_SENTENCE.items()}
    return {
        "ids": ids.cpu().numpy(),
        "sums": sums[ids].cpu().numpy(),
        "counts": counts[ids].cpu().numpy(),
        **rows,
    }


def extract(
    teacher: Any,
    sentences: Sequence[str],
    vocab: Sequence[str],
    *,
    lowercase: bool,
    batch_size: int = 32,
    checkpoint: Path | None = None,
    save_every: float = 180.0,
    show_progress: bool = True,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
    batch_tokens: int | None = None,
    workers: int = 1,
) -> Extraction:
    """Run the teacher over ``sentences`` once and gather stage-1 states for ``vocab``.

    :param layer: teacher layer whose token states are averaged (``None``: the last; ASE uses any).
    :param splitter: how texts split into words (default: spaces and punctuation).
    :param batch_tokens: a GPU teacher's token budget per batch (``None``: ``batch_size`` sentences).
    :param workers: processes that make batches ready (1: a thread of this process).
    """
    splitter = splitter or WordSplitter()
    index = {w: i for i, w in enumerate(vocab)}
    plan = plan_batches(teacher, sentences, batch_size, batch_tokens)
    key = plan_key(plan)
    device = getattr(teacher, "device", "cpu")
    sums, counts = zero_sums(len(vocab), teacher.hidden_size, device)
    rows, done = SentenceRows(len(sentences)), 0
    saved = resume(checkpoint, len(plan), key) if checkpoint is not None and checkpoint.is_file() else None
    if saved is not None:
        sums, counts, arrays, done = saved
        sums, counts, rows = sums.to(device), counts.to(device), SentenceRows(len(sentences), arrays)
    run = _Pass(teacher, index, lowercase, splitter, layer)
    last_save = time.monotonic()
    progress = tqdm(
        total=len(sentences),
        desc="teacher passes",
        unit=" sent",
        disable=not show_progress,
        initial=sum(len(b) for b in plan[:done]),
        mininterval=2,
    )
    planned = (_Batch(chosen, [sentences[i] for i in chosen]) for chosen in plan[done:])
    with _host_threads(teacher), ahead(planned, run, workers) as ready:
        for number, batch in enumerate(ready, start=done):
            rows.put(batch.rows, run(batch, sums, counts))
            progress.update(len(batch.rows))
            if checkpoint is not None and time.monotonic() - last_save > save_every:
                save_partial(checkpoint, sums, counts, rows.arrays, number + 1, key)
                last_save = time.monotonic()
    progress.close()
    if checkpoint is not None:
        save_partial(checkpoint, sums, counts, rows.arrays, len(plan), key)
    return rows.result(sums, counts)


@contextlib.contextmanager
def _host_threads(teacher: Any) -> Iterator[None]:
    """One torch thread for the host's small reductions while ONNX Runtime (with its own threads) runs the
    teacher: OpenMP's hand-offs on busy cores cost more than these ops (the sums are the same to the bit)."""
    if getattr(teacher, "onnx", None) is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ the teacher's own embeddings
def sentence_embeddings(
    teacher: Any, texts: Sequence[str], batch_size: int, dim: int, show_progress: bool = False
) -> np.ndarray:
    """The teacher's own ``dim``-d sentence embeddings of ``texts`` (unit rows, input order), in
    batches sorted by the teacher's token count."""
    out = np.zeros((len(texts), dim), np.float32)
    for rows in tqdm(plan_batches(teacher, texts, batch_size), "teacher", disable=not show_progress):
        out[rows] = teacher.forward([texts[i] for i in rows]).sentence.numpy()
    return out


def alone_states(
    teacher: Any,
    texts: Sequence[str],
    batch_size: int,
    layer: int | None = None,
    show_progress: bool = False,
) -> np.ndarray:
    """Each text alone through the teacher: the mean of its own tokens' states at ``layer`` (input order)."""
    out = np.zeros((len(texts), teacher.hidden_size), np.float32)
    for start in tqdm(range(0, len(texts), batch_size), "pieces", disable=not show_progress):
        chunk = list(texts[start : start + batch_size])
        if hasattr(teacher, "run"):  # the means taken on the teacher's device: only they reach the host
            encoded = teacher.encode(chunk)
            states, _ = teacher.run(encoded.inputs, layer)
            own = torch.from_numpy(encoded.own).to(states.device)
        else:
            batch = teacher.forward(chunk, layer)
            states, own = batch.states, batch.own
        mask = own.unsqueeze(-1).to(torch.float32)
        means = (states.float() * mask).sum(1) / mask.sum(1).clamp(min=1)
        out[start : start + len(chunk)] = means.cpu().numpy()
    return out
