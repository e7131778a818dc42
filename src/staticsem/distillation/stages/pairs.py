"""Training on pairs: any staticsem model's word (and piece) rows fine-tuned for retrieval, similarity kept.

The loss is sentence-transformers' MultipleNegativesRankingLoss on means of rows: each query against every
distinct document of its batch (the positives, and one hard negative per query), cross-entropy towards its
own positive at temperature τ. Documents are pooled once per batch, so pairs that share a positive (SQuAD
asks several questions of one paragraph) share its column, and another positive of the same query text is
masked: neither is ever a negative. With ``matryoshka`` the loss is the mean over the leading dimensions
given and the full width. The anchor is stage 3a's distillation objective on the teacher's embeddings of a
build's sentences (its work folder, or a corpus the teacher encodes), weighted beside the pairs in every
step, so sentence similarity holds while retrieval improves. By default (``into='modes'``) the trained rows
become the ``search`` row set of ``encode_query`` and ``encode_document`` (``staticsem.modes``) and
``encode`` keeps the model's own: similarity cannot be spent at all, and the anchor is optional.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.corpus.pairs import Pairs
from staticsem.distillation.stages.kd import Bags, Distillation
from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.distillation.stages.pairs_settings import PairsSettings
from staticsem.distillation.stages.training import Objective, train_table
from staticsem.errors import InputError
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel
from staticsem.modes import SEARCH_PIECE_WEIGHT, RowSet, both_modes_with

logger = logging.getLogger(__name__)


class Ranking(Objective):
    """In-batch negatives ranking (MNRL) of query → document, shared positives masked, optional Matryoshka."""

    name = "pairs"

    def __init__(
        self,
        model: StaticModel,
        pairs: Pairs,
        negatives: np.ndarray | None,
        tau: float,
        dims: Sequence[int] = (),
    ) -> None:
        """``negatives``: per pair an index into ``documents`` (see ``documents_of``), or None."""
        self.documents, self.positives = documents_of(pairs)
        self.negatives = negatives
        self.queries = Bags(model, pairs.queries)
        self.docs = Bags(model, self.documents)
        self.query_group = np.unique(pairs.queries, return_inverse=True)[1]
        self.tau, self.size = tau, len(pairs)
        self.dims = sorted({*dims, model.dim}, reverse=True)

    def to(self, device: str | torch.device) -> Ranking:
        self.queries.to(device)
        self.docs.to(device)
        return self

    def usable(self) -> np.ndarray:
        known = (self.queries.counts > 0) & (self.docs.counts[self.positives] > 0)
        if self.negatives is not None:
            known &= self.docs.counts[self.negatives] > 0
        return np.flatnonzero(known)

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        wanted = self.positives[rows]
        if self.negatives is not None:
            wanted = np.concatenate([wanted, self.negatives[rows]])
        docs, column = np.unique(wanted, return_inverse=True)  # one column per distinct document
        target = column[: len(rows)]
        # another positive of the same query text is no negative: mask it (its own target stays)
        group = self.query_group[rows]
        first, second = np.nonzero(group[:, None] == group[None, :])
        other = target[second] != target[first]
        mask = np.zeros((len(rows), len(docs)), bool)
        mask[first[other], target[second[other]]] = True
        queries = self.queries.pool(table, rows, sparse)
        documents = self.docs.pool(table, docs, sparse)
        labels = torch.from_numpy(target).to(table.device)
        masked = torch.from_numpy(mask).to(table.device)
        losses = [
            F.cross_entropy(
                (
                    F.normalize(queries[:, :d], dim=1) @ F.normalize(documents[:, :d], dim=1).T / self.tau
                ).masked_fill(masked, float("-inf")),
                labels,
            )
            for d in self.dims
        ]
        return torch.stack(losses).mean()


def documents_of(pairs: Pairs) -> tuple[list[str], np.ndarray]:
    """The distinct documents (positives, then given negatives) and each pair's positive among them."""
    texts = [*pairs.positives, *(n for n in pairs.negatives if n is not None)]
    documents = list(dict.fromkeys(texts))
    index = {text: i for i, text in enumerate(documents)}
    return documents, np.array([index[p] for p in pairs.positives], np.int64)


@dataclass(frozen=True)
class Anchor:
    """Sentences and the teacher's embeddings of them: the distillation objective that keeps similarity."""

    sentences: list[str]
    targets: np.ndarray

    def digest(self) -> str:
        """A short hash of the sentences and their targets (what a resumed training must be anchored by)."""
        digest = hashlib.sha256(np.ascontiguousarray(self.targets, dtype=np.float32).tobytes())
        for sentence in self.sentences:
            digest.update(sentence.encode("utf-8", "surrogatepass") + b"\0")
        return digest.hexdigest()[:16]

    @classmethod
    def from_work(cls, folder: Path) -> Anchor:
        """The chosen (and KD-only) sentences of a build's work folder with their teacher embeddings."""
        chosen = next((folder / f for f in ("select.json", "merge.json") if (folder / f).is_file()), None)
        if chosen is None or not (folder / "stage1.safetensors").is_file():
            raise InputError(f"{folder}: not a finished build's work folder (no chosen sentences or stage 1)")
        sentences = json.loads(chosen.read_text(encoding="utf-8"))["sentences"]
        targets = [load_file(str(folder / "stage1.safetensors"))["embeddings"]]
        if (folder / "targets.json").is_file() and (folder / "targets.safetensors").is_file():
            sentences += json.loads((folder / "targets.json").read_text(encoding="utf-8"))["sentences"]
            targets.append(load_file(str(folder / "targets.safetensors"))["embeddings"])
        return cls(sentences, np.concatenate(targets))


def anchor_from_corpus(
    model: StaticModel,
    sources: Sequence[str],
    settings: PairsSettings,
    exclude: Sequence[str] = (),
    work: Path | None = None,
    show_progress: bool = True,
    device: str = "cpu",
) -> Anchor:
    """Up to ``anchor_sentences`` sentences of ``sources`` (``exclude`` applied) with the embeddings of the
    teacher the model records (its prompt too; on ``device``: torch, fp16 on a GPU, fp32 on the CPU);
    resumable and cached in ``work``."""
    from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
    from staticsem.distillation.stages.extract import extract
    from staticsem.distillation.teachers.device import resolve_runtime
    from staticsem.distillation.teachers.teacher import Teacher

    options = CorpusOptions(exclude=tuple(exclude), max_sentences=settings.anchor_sentences)
    sentences = list(iter_sentences(sources, options))
    if not sentences:
        raise InputError("--kd-corpus: no sentence to anchor the training with")
    teacher_name = model.metadata.get("teacher")
    prompt = (model.metadata.get("settings") or {}).get("prompt")
    if not isinstance(teacher_name, str):
        raise InputError("this model records no teacher: give the build's work folder (--anchor) or none")
    runtime = resolve_runtime(device, "torch")  # fp32 on the CPU (as before), fp16 on a GPU
    precision = {} if runtime.precision == "fp32" else {"precision": runtime.precision}
    key = fingerprint({"teacher": teacher_name, "prompt": prompt, **precision}, sentences)
    cached = None if work is None else work / f"anchor-{key}.safetensors"
    if cached is not None and cached.is_file():
        return Anchor(sentences, load_file(str(cached))["embeddings"])
    teacher = Teacher(
        teacher_name,
        prompt=prompt,
        device=runtime.device,
        backend=runtime.backend,
        precision=runtime.precision,
        cache=None if work is None else work / "onnx",
    )
    partial = None if work is None else work / f"anchor-{key}.partial.safetensors"
    result = extract(
        teacher, sentences, [], lowercase=teacher.lowercases, checkpoint=partial, show_progress=show_progress
    )
    if cached is not None and partial is not None:
        save_tensors(cached, {"embeddings": result.embeddings})
        partial.unlink(missing_ok=True)
    return Anchor(sentences, result.embeddings)


def negatives_for(
    pairs: Pairs, settings: PairsSettings, work: Path | None, show_progress: bool
) -> np.ndarray | None:
    """Each pair's negative as a document index: the file's, else mined with BM25 (cached in ``work``);
    None without negatives (none given, mining off)."""
    documents, positives = documents_of(pairs)
    index = {text: i for i, text in enumerate(documents)}
    given = [n is not None for n in pairs.negatives]
    if all(given):
        return np.array([index[n] for n in pairs.negatives if n is not None], np.int64)
    if not settings.hard_negatives:
        if any(given):
            raise InputError("some pairs files give negatives and others none: mine the rest (--pairs-mine)")
        return None
    from staticsem.distillation.stages.mining import mine_negatives

    key = fingerprint({"depth": settings.mine_depth, "seed": settings.seed}, [*pairs.queries, *documents])
    cached = None if work is None else work / f"negatives-{key}.safetensors"
    if cached is not None and cached.is_file():
        mined = load_file(str(cached))["negatives"]
    else:
        mined = mine_negatives(
            pairs.queries, positives, documents, settings.mine_depth, settings.seed, show_progress
        )
        if cached is not None:
            save_tensors(cached, {"negatives": mined})
    return np.array([mined[i] if n is None else index[n] for i, n in enumerate(pairs.negatives)], np.int64)


def train_pairs(
    model: StaticModel,
    pairs: Pairs,
    settings: PairsSettings = PairsSettings(),
    anchor: Anchor | None = None,
    work: Path | None = None,
    show_progress: bool = True,
    save_every: float = 180.0,
    device: str | None = None,
) -> tuple[StaticModel, dict[str, Any]]:
    """Fine-tune ``model`` on ``pairs`` (with ``anchor`` weighted beside them) on ``device`` (``None``: a GPU
    where torch sees one); ``work`` keeps the mined negatives and a resumable checkpoint (saved every
    ``save_every`` seconds).

    :raises InputError: for bad settings, or too few pairs with known words on both sides.
    """
    settings.validate(model.dim)
    negatives = negatives_for(pairs, settings, work, show_progress)
    ranking = Ranking(model, pairs, negatives, settings.tau, settings.matryoshka)
    objectives: list[Objective] = [ranking]
    anchored = anchor if settings.anchor_weight > 0 else None  # a weight of 0 trains without it
    if anchored is not None:
        distillation = Distillation(model, anchored.sentences, anchored.targets, settings.tau)
        distillation.weight = settings.anchor_weight
        objectives.append(distillation)
    loop = KDSettings(
        tau=settings.tau,
        lr=settings.lr,
        batch_size=settings.batch_size,
        eval_every=settings.eval_every,
        patience=settings.patience,
        max_steps=settings.max_steps,
        dev_size=settings.dev_size,
        seed=settings.seed,
    )
    frozen = None if settings.train_pieces or model.pieces is None else len(model)
    key = fingerprint(  # a checkpoint resumes only the same start, pairs, anchor and settings
        {"settings": asdict(settings), "anchor": None if anchored is None else anchored.digest()},
        [table_digest(model), *pairs.queries, *pairs.positives, *(n or "" for n in pairs.negatives)],
    )
    trained, stats = train_table(
        model,
        objectives,
        loop,
        show_progress,
        frozen_from=frozen,
        checkpoint=None if work is None else work / "pairs-training.safetensors",
        key=key,
        save_every=save_every,
        device=device,
    )
    skipped = len(pairs) - len(ranking.usable())
    if skipped:
        logger.warning("%d pairs skipped: a side has no word the model knows", skipped)
    record = {
        **stats,
        "pairs": pairs.counts(),
        "dropped": dict(pairs.dropped),
        "skipped_unknown": skipped,
        "anchor_sentences": 0 if anchored is None else len(anchored.sentences),
        "settings": asdict(settings),
    }
    if settings.into == "modes":
        trained = with_search_rows(model, trained)
    trained.metadata = {**model.metadata, "pairs": record}
    return trained, record


def with_search_rows(
    model: StaticModel, trained: StaticModel, name: str = "search", int8: bool = False
) -> StaticModel:
    """``model`` with ``trained``'s rows (``int8``: quantised, one scale per row) as the query and document
    modes' own (``encode`` unchanged; each mode keeps its other settings; a model with pieces and no mode
    weight for them, such as one distilled before the modes or imported, gets the search modes' default
    ``SEARCH_PIECE_WEIGHT``)."""
    pieces = None if trained.pieces is None else np.asarray(trained.pieces.vectors, np.float32)
    rows = RowSet(np.asarray(trained.vectors, np.float32), pieces)
    rows = rows.quantized() if int8 else rows
    modes = both_modes_with(model.modes, rows=name)
    if pieces is not None:
        modes = {mode: {"piece_weight": SEARCH_PIECE_WEIGHT, **config} for mode, config in modes.items()}
    return model.with_row_set(name, rows).with_modes(**modes)


def table_digest(model: StaticModel) -> str:
    """A short hash of the model's rows (what a resumed run must start from)."""
    digest = hashlib.sha256(np.ascontiguousarray(model.vectors).tobytes())
    if model.pieces is not None:
        digest.update(np.ascontiguousarray(model.pieces.vectors).tobytes())
    return digest.hexdigest()[:16]
