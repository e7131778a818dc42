"""Stage 1, contextual extraction: each vocabulary word's mean last-layer state over its occurrences.

One teacher pass over a sentence yields every vocabulary word in it (states averaged over the word's
subword tokens, then over occurrences) and the teacher's own sentence embedding, kept as the
knowledge-distillation target. The work per batch is split so the teacher never waits:

* the batches are planned first (``plans``), the sentences sorted by the teacher's token count:
  ``batch_size`` of them on the CPU, a token budget on a GPU (less padding: the forward 1.53× faster on 2
  cores than batches sorted by characters; the int8 teacher's per-batch activation scales see other
  neighbours, so a CPU build differs from one planned by characters in rounding, its quality the same:
  docs/benchmarks);
* each batch is made ready ahead of the teacher, run through it and reduced on its device (``passes``):
  only reduced vectors reach the host; a GPU out of memory halves the batch and retries it.

Partial sums are saved every few minutes, so an interrupted run (even kill -9) resumes at the last saved
batch; a partial made by another batch plan (another device) is not resumed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.stages.passes import Batch, Pass, ahead, zero_sums
from staticsem.distillation.stages.plans import plan_batches, plan_key
from staticsem.io.atomic import save_tensors
from staticsem.text import WordSplitter

logger = logging.getLogger(__name__)


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
    run = Pass(teacher, index, lowercase, splitter, layer)
    return run(Batch(np.arange(len(texts)), list(texts)), sums, counts)


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
    run = Pass(teacher, index, lowercase, splitter, layer)
    starts = np.cumsum([0] + [len(b) for b in batches])
    found = []
    with ahead(
        (Batch(np.arange(a, b), list(t)) for a, b, t in zip(starts, starts[1:], batches, strict=False)),
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
    run = Pass(teacher, index, lowercase, splitter, layer)
    last_save = time.monotonic()
    progress = tqdm(
        total=len(sentences),
        desc="teacher passes",
        unit=" sent",
        disable=not show_progress,
        initial=sum(len(b) for b in plan[:done]),
        mininterval=2,
    )
    planned = (Batch(chosen, [sentences[i] for i in chosen]) for chosen in plan[done:])
    # the bar closed whatever happens: an error's line starts on a line of its own
    with progress, _host_threads(teacher), ahead(planned, run, workers) as ready:
        for number, batch in enumerate(ready, start=done):
            rows.put(batch.rows, run(batch, sums, counts))
            progress.update(len(batch.rows))
            if checkpoint is not None and time.monotonic() - last_save > save_every:
                save_partial(checkpoint, sums, counts, rows.arrays, number + 1, key)
                last_save = time.monotonic()
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
