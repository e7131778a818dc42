"""``StaticModel``: one fixed vector per word; a text is the L2-normalised mean of its word vectors.

Pure numpy (plus HF ``tokenizers`` for the unknown-word fallback): encoding never imports torch.
fastText models carry an n-gram table instead (``staticsem.ngrams``): an unknown word gets the mean of its
n-gram vectors, cached as an extra row with id >= V; neighbour searches still rank vocabulary words only.
SWE models may carry learned subword pieces (``staticsem.pieces``) that compose unknown words the same way.
Imported model2vec / sentence-transformers models are token-level (``staticsem.tokens``): one row per token
of their own tokenizer, a text is the mean of all its token rows, a word the mean of its pieces.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from staticsem.errors import InputError, ModelFormatError
from staticsem.model_checks import check_parts
from staticsem.model_words import WordQueries
from staticsem.modes import ModeSettings, RowSet, check_modes, mode_variant, parse_mode, read_modes
from staticsem.ngrams import ComposedRows, NgramTable
from staticsem.phrases import DEFAULT_MODE, is_phrase
from staticsem.pieces import PieceTable
from staticsem.text import UNKNOWN, WordLookup, make_splitter
from staticsem.tokens import TokenLookup, TokenRules

_COMPOSED_BYTES = 256 << 20  # composed unknown-word rows are dropped between batches beyond this
_worker_model: StaticModel | None = None


def _worker_encode(batch: tuple[list[str], bool]) -> np.ndarray:
    assert _worker_model is not None
    return _worker_model._encode_batch(*batch)


def _set_worker_model(model: StaticModel) -> None:
    global _worker_model
    _worker_model = model
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # a forked worker tokenises on its own thread


class StaticModel(WordQueries):
    """Vocabulary + matrix (V × D) + optional subword tokenizer + metadata.

    :param vocab: the words, one per matrix row, unique.
    :param vectors: V × D matrix stored as float32, float16 or int8.
    :param scales: for int8 matrices, the float32 scale of each row (V values).
    :param tokenizer: subword tokenizer used to find a known prefix of unknown words.
    :param ngrams: fastText n-gram table giving unknown words a vector (tried before the tokenizer).
    :param pieces: learned vectors of ``tokenizer``'s pieces giving unknown words a vector (instead of the
        longest known prefix).
    :param splitter: name of the word-splitting rule (``staticsem.text.register_splitter``): ``words``
        (default) or ``subword`` (unspaced scripts such as Chinese split into the tokenizer's pieces).
    :param metadata: teacher, method, settings and anything else worth keeping with the model.
    :param tokens: token-level encoding rules: rows are ``tokenizer``'s tokens in id order and texts are
        tokenised by it (imported model2vec / sentence-transformers models); ``None`` for word-level models.
    :param normalize: whether ``encode`` L2-normalises by default.
    :param modes: how ``encode_query`` and ``encode_document`` differ from ``encode`` (``staticsem.modes``).
    :param row_sets: rows of the modes' own, by name (``staticsem.modes.RowSet``).
    :param phrases: how the vocabulary's phrases (entries of two or three words, ``staticsem.phrases``)
        count in a text: ``add`` their row beside their words' rows, or ``replace`` them.
    :raises ModelFormatError: when the pieces do not fit together (the message carries the numbers).
    """

    def __init__(
        self,
        vocab: Sequence[str],
        vectors: np.ndarray,
        *,
        scales: np.ndarray | None = None,
        tokenizer: Tokenizer | None = None,
        ngrams: NgramTable | None = None,
        pieces: PieceTable | None = None,
        metadata: dict[str, Any] | None = None,
        splitter: str = "words",
        tokens: TokenRules | None = None,
        normalize: bool = True,
        modes: Mapping[str, ModeSettings] | None = None,
        row_sets: Mapping[str, RowSet] | None = None,
        phrases: str = DEFAULT_MODE,
    ) -> None:
        self.vocab = list(vocab)
        self.vectors = vectors
        self.scales = None if scales is None else np.asarray(scales, dtype=np.float32)
        self.tokenizer = tokenizer
        self.ngrams = ngrams
        self.pieces = pieces
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.tokens = tokens
        self.normalize = normalize
        check_parts(self.vocab, vectors, self.scales, tokenizer, ngrams, pieces, tokens)
        self.modes = read_modes(modes)
        self.row_sets = dict(row_sets or {})
        check_modes(self.modes, pieces, self.row_sets, vectors.shape)
        self._variants: dict[str, StaticModel | None] = {}  # per mode; None: encodes as this model
        try:
            self.splitter = make_splitter(splitter, tokenizer)
        except ValueError as exc:
            raise ModelFormatError(str(exc)) from None
        composer = ngrams if ngrams is not None else pieces
        self._composed = None if composer is None else ComposedRows(composer, len(self.vocab))
        fallback = None if self._composed is None else self._composed.row
        self._lookup: WordLookup | TokenLookup
        if tokens is None:
            try:
                self._lookup = WordLookup(self.vocab, tokenizer, fallback, self.splitter, phrases)
            except ValueError as exc:
                raise ModelFormatError(str(exc)) from None
        else:
            self._lookup = TokenLookup(tokenizer, tokens)  # type: ignore[arg-type]  # _validate checked it
        self._unit_cache: np.ndarray | None = None

    # ------------------------------------------------------------------ properties
    @property
    def phrases(self) -> list[str]:
        """The vocabulary's phrases (entries of several words), in row order."""
        return [entry for entry in self.vocab if is_phrase(entry)]

    @property
    def phrase_mode(self) -> str:
        """How a matched phrase counts in a text: ``add`` (beside its words) or ``replace``."""
        return self._lookup.phrase_mode if isinstance(self._lookup, WordLookup) else DEFAULT_MODE

    @property
    def dim(self) -> int:
        """Number of dimensions of each vector."""
        return int(self.vectors.shape[1])

    @property
    def dtype(self) -> str:
        """Storage dtype of the matrix: float32, float16 or int8."""
        return str(self.vectors.dtype)

    def __len__(self) -> int:
        return len(self.vocab)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and word in self._lookup.index

    def __repr__(self) -> str:
        extra = "" if self.ngrams is None else f", ngram_buckets={self.ngrams.buckets}"
        extra += "" if self.pieces is None else f", pieces={len(self.pieces.vectors)}"
        extra += "" if self.tokens is None else ", token_level=True"
        return f"StaticModel(words={len(self)}, dim={self.dim}, dtype={self.dtype}{extra})"

    # ------------------------------------------------------------------ encoding
    def encode(
        self,
        texts: str | Sequence[str],
        *,
        batch_size: int = 4096,
        workers: int = 1,
        show_progress: bool = False,
        normalize: bool | None = None,
    ) -> np.ndarray:
        """Encode texts to L2-normalised float32 rows (a zero row where no word is known).

        :param texts: a list of texts, or one text (then a 1-D vector is returned).
        :param batch_size: texts handled per vectorised step.
        :param workers: processes to use for large inputs (``0`` means all cores).
        :param show_progress: show a progress bar.
        :param normalize: ``False`` gives the plain mean of the word vectors; ``None`` the model's setting
            (``True`` except for models imported without normalisation).
        """
        if normalize is None:
            normalize = self.normalize
        if isinstance(texts, str):
            return self.encode([texts], batch_size=batch_size, normalize=normalize)[0]
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}")
        texts = list(texts)
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise InputError(f"text {bad} is a {type(texts[bad]).__name__}, not a str")
        if workers == 0:
            workers = os.cpu_count() or 1
        batches = [(texts[i : i + batch_size], normalize) for i in range(0, len(texts), batch_size)]
        parts = list(self._map_batches(batches, workers, show_progress))
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)

    def encode_query(self, texts: str | Sequence[str], **options: Any) -> np.ndarray:
        """``encode`` (same options) for search queries: as the model's ``query`` mode says."""
        return self.for_mode("query").encode(texts, **options)

    def encode_document(self, texts: str | Sequence[str], **options: Any) -> np.ndarray:
        """``encode`` (same options) for the documents searched: as the model's ``document`` mode says."""
        return self.for_mode("document").encode(texts, **options)

    def for_mode(self, mode: str | None) -> StaticModel:
        """The model encoding as ``mode`` (``query``, ``document``; ``None``: ``encode``), itself when the
        mode changes nothing; a variant shares this model's rows.

        :raises InputError: for an unknown mode.
        """
        name = parse_mode(mode)
        if name is None:
            return self
        if name not in self._variants:
            self._variants[name] = mode_variant(self, name)
        return self._variants[name] or self

    def _map_batches(
        self, batches: list[tuple[list[str], bool]], workers: int, show_progress: bool
    ) -> Iterator[np.ndarray]:
        if workers > 1 and len(batches) > 1:
            ctx = get_context("fork")
            with ProcessPoolExecutor(
                min(workers, len(batches)), mp_context=ctx, initializer=_set_worker_model, initargs=(self,)
            ) as pool:
                results: Iterator[np.ndarray] = pool.map(_worker_encode, batches)
                yield from _progress(results, len(batches), show_progress)
        else:
            yield from _progress((self._encode_batch(*b) for b in batches), len(batches), show_progress)

    def _encode_batch(self, texts: Sequence[str], normalize: bool = True) -> np.ndarray:
        """Normalised sums (or means) of each text's known word rows.

        Texts with the same number of known words are summed together as one (texts, words, dim)
        block: contiguous adds with float16/int8 cast on the fly, no batch-wide float32 copy.
        """
        if self._composed is not None and self._composed.nbytes > _COMPOSED_BYTES:
            self._composed.clear()
            self._lookup.forget()
        flat, lengths = self._lookup.ids(texts)
        sums = np.zeros((len(texts), self.dim), dtype=np.float32)
        known = flat != UNKNOWN
        if not known.any():
            return sums
        owner = np.repeat(np.arange(len(texts)), lengths)[known]
        row_ids = flat[known]
        composed = self._composed is not None and int(row_ids.max()) >= len(self.vocab)
        counts = np.bincount(owner, minlength=len(texts))
        starts = np.zeros(len(texts), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        order = np.argsort(counts, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(counts[order])) + 1):
            size = int(counts[group[0]])
            if size == 0:
                continue
            block_ids = row_ids[starts[group][:, None] + np.arange(size)]
            if composed:
                block = self._rows(block_ids)
            else:
                block = self.vectors[block_ids]
                if self.scales is not None:
                    block = block.astype(np.float32) * self.scales[block_ids][..., None]
            sums[group] = block.sum(axis=1, dtype=np.float32)
        if not normalize:
            return sums / np.maximum(counts, 1)[:, None].astype(np.float32)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        return sums / np.maximum(norms, np.finfo(np.float32).tiny)

    def row_ids(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The rows ``encode`` averages for each text: flat row ids and each text's count of them.

        Unknown words are left out (they add nothing to a text's vector); fastText models' composed rows
        for unknown words have ids >= ``len(self)``. Used to train on the same rows inference reads.
        """
        flat, lengths = self._lookup.ids(texts)
        known = flat != UNKNOWN
        owner = np.repeat(np.arange(len(lengths)), lengths)
        return flat[known], np.bincount(owner[known], minlength=len(lengths)).astype(np.int64)

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """Float32 rows of ``ids`` (any shape): vocabulary rows and composed unknown-word rows."""
        outside = ids >= len(self.vocab)
        inside = np.where(outside, 0, ids)
        rows = self.vectors[inside].astype(np.float32)
        if self.scales is not None:
            rows *= self.scales[inside][..., None]
        if self._composed is not None and outside.any():
            rows[outside] = self._composed.vectors(ids[outside])
        return rows

    def similarity(self, text_a: str, text_b: str) -> float:
        """Cosine similarity of two texts' embeddings (0.0 if either has no known word)."""
        a, b = self.encode([text_a, text_b], normalize=True)
        return float(a @ b)

    # ------------------------------------------------------------------ shape and persistence
    def truncate(self, dim: int) -> StaticModel:
        """A model keeping the first ``dim`` dimensions (PCA-ordered models lose the least)."""
        if not 1 <= dim <= self.dim:
            raise InputError(f"cannot truncate {self.dim} dimensions to {dim}")
        return self.replace(
            vectors=np.ascontiguousarray(self.vectors[:, :dim]),
            ngrams=None if self.ngrams is None else self.ngrams.truncate(dim),
            pieces=None if self.pieces is None else self.pieces.truncate(dim),
            metadata={**self.metadata, "truncated_from": self.dim},
            row_sets={name: rows.truncate(dim) for name, rows in self.row_sets.items()},
        )

    def without_phrases(self) -> StaticModel:
        """This model without its phrase rows (for formats that have no phrases): the words' rows alone."""
        keep = np.flatnonzero([not is_phrase(entry) for entry in self.vocab])
        if len(keep) == len(self.vocab):
            return self
        parts = self._parts() | {
            "scales": None if self.scales is None else self.scales[keep],
            "row_sets": {name: rows.select(keep) for name, rows in self.row_sets.items()},
        }
        return StaticModel([self.vocab[i] for i in keep], self.vectors[keep], **parts)

    def with_pieces(self, pieces: PieceTable) -> StaticModel:
        """This word-level model with ``pieces`` as its table of subword pieces (in place of any)."""
        return self.replace(tokenizer=pieces.tokenizer, pieces=pieces, ngrams=None, tokens=None)

    def with_rows(
        self, vectors: np.ndarray | None, pieces: PieceTable | None, scales: np.ndarray | None = None
    ) -> StaticModel:
        """This model encoding with ``vectors`` (int8 ones with ``scales``) as its word rows (``None``: its
        own) and ``pieces``, without modes (a mode's variant, ``staticsem.modes.mode_variant``)."""
        own = vectors is None
        return self.replace(
            vectors=self.vectors if own else vectors,
            scales=self.scales if own else scales,
            pieces=pieces,
            modes=None,
            row_sets=None,
        )

    def with_row_set(self, name: str, rows: RowSet) -> StaticModel:
        """This model holding ``rows`` as row set ``name`` (in place of any), for modes to encode with."""
        return self.replace(row_sets={**self.row_sets, name: rows})

    def replace(self, **changes: Any) -> StaticModel:
        """A new model of this one's parts (every constructor argument but the vocabulary), ``changes`` in
        place of some, e.g. ``replace(vectors=trained, pieces=trained_pieces)``; modes and their row sets
        are kept unless changed."""
        parts: dict[str, Any] = {"vectors": self.vectors, "scales": self.scales, **self._parts()}
        parts.update(changes)
        return StaticModel(self.vocab, **parts)

    def _parts(self) -> dict[str, Any]:
        """The constructor's arguments that do not hang on the rows (all but vocabulary, rows, scales)."""
        return {
            "tokenizer": self.tokenizer,
            "ngrams": self.ngrams,
            "pieces": self.pieces,
            "metadata": self.metadata,
            "splitter": self.splitter.name,
            "tokens": self.tokens,
            "normalize": self.normalize,
            "modes": self.modes,
            "row_sets": self.row_sets,
            "phrases": self.phrase_mode,
        }

    def with_modes(
        self,
        query: ModeSettings | Mapping[str, Any] | None = None,
        document: ModeSettings | Mapping[str, Any] | None = None,
    ) -> StaticModel:
        """This model with these modes' settings in place of any, e.g. ``with_modes(query={"piece_weight":
        1.0})`` (no retraining; see ``staticsem.modes``); a mode left ``None`` encodes as ``encode``."""
        model = copy.copy(self)
        model.modes = read_modes({"query": query, "document": document})
        check_modes(model.modes, self.pieces, self.row_sets, self.vectors.shape)
        model.metadata, model._variants = dict(self.metadata), {}
        return model

    def save(self, path: str | Path, **options: Any) -> Path:
        """Save in staticsem's folder format (see ``staticsem.io.native_write.save`` for options)."""
        from staticsem.io.native_write import save

        return save(self, Path(path), **options)

    def push_to_hub(self, repo_id: str, private: bool = False, token: str | None = None) -> str:
        """Upload to the Hugging Face hub repository ``repo_id`` (created if needed) in staticsem's format,
        with a model card; ``staticsem.load(repo_id)`` reads it back. Needs the ``hub`` extra.

        :param token: a hub token with write access [the environment's: ``HF_TOKEN`` or ``hf auth login``].
        :returns: the repository's URL.
        """
        from staticsem.io.hub import push_model

        return push_model(self, repo_id, private=private, token=token)


def _progress(items: Iterator[np.ndarray], total: int, enabled: bool) -> Iterator[np.ndarray]:
    if not enabled or total < 2:
        yield from items
        return
    from rich.progress import track

    yield from track(items, total=total, description="encoding")
