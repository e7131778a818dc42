"""Encoding by purpose: ``query`` and ``document`` modes beside the symmetric ``encode``.

Retrieval can encode a search query and the documents it searches differently (sentence-transformers'
``encode_query`` / ``encode_document``, hosted APIs' ``input_type``): learned subword pieces help retrieval
at full weight and sentence similarity at a lower one. A model folder's ``config.json`` keeps each mode's
settings under ``modes``, only those a mode changes::

    "modes": {"query": {"piece_weight": 1.0}, "document": {"piece_weight": 1.0}}

``piece_weight`` replaces the pieces' weight (``PieceTable.weight``) in that mode. ``rows`` names a set of
rows of the modes' own (a ``RowSet``: one row per word and per piece, stored beside the model's as
``rows.NAME`` and ``rows.NAME.pieces``, int8 ones with ``rows.NAME.scales`` and
``rows.NAME.pieces.scales``), e.g. rows trained on query→passage pairs
(``staticsem train-pairs``) while ``encode`` keeps the distilled ones for similarity::

    "modes": {"query": {"rows": "search", "piece_weight": 0.75}, "document": {"rows": "search", ...}}

A mode without settings (and every mode of a model without ``modes``) encodes exactly as ``encode``. A
reader refuses a mode or a setting it does not know, naming it, rather than encode without it: a later
staticsem can add settings (term weights) and older files still read the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from staticsem.errors import InputError, ModelFormatError
from staticsem.quantize import DType, dequantize, quantize

if TYPE_CHECKING:
    from staticsem.pieces import PieceTable

MODES = ("query", "document")
# the pieces' weight of the search modes by default: the 100k-word default at 0.75 gets SciFact 54.10
# against 52.90 at encode's 0.5 (1.0: 52.80); with rows trained on pairs 57.45 against 56.39 at 0.5
SEARCH_PIECE_WEIGHT = 0.75
ROW_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ALIASES = {"search_query": "query", "search_document": "document"}  # Cohere's and Nomic's names


@dataclass(frozen=True)
class ModeSettings:
    """How one mode encodes where it differs from ``encode``; ``None`` keeps the model's own setting.

    :param piece_weight: the weight of an unknown word's pieces (0..1; see ``staticsem.pieces``).
    :raises ModelFormatError: for a weight that is not a number within 0..1.
    """

    piece_weight: float | None = None
    rows: str | None = None

    def __post_init__(self) -> None:
        if self.rows is not None and (not isinstance(self.rows, str) or not ROW_NAME.fullmatch(self.rows)):
            raise ModelFormatError(
                f"a mode's rows must be a name of letters, digits, _ or -, got {self.rows!r}"
            )
        weight = self.piece_weight
        if weight is None:
            return
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
            raise ModelFormatError(f"a mode's piece_weight must be a number within 0..1, got {weight!r}")
        object.__setattr__(self, "piece_weight", float(weight))

    def config(self) -> dict[str, Any]:
        """The settings this mode changes, as written to ``config.json``."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_config(cls, mode: str, value: object) -> ModeSettings:
        """Read one mode's entry of ``config.json``'s ``modes``."""
        if isinstance(value, ModeSettings):
            return value
        if not isinstance(value, Mapping):
            raise ModelFormatError(f"mode {mode!r}: settings must be an object, got {value!r}")
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ModelFormatError(
                f"mode {mode!r}: unknown setting {unknown[0]!r} (this staticsem knows "
                f"{', '.join(sorted(known))}; a newer staticsem may have written it)"
            )
        return cls(**value)


Modes = Mapping[str, ModeSettings]


def parse_mode(mode: str | None) -> str | None:
    """``query`` or ``document`` (``search_query`` / ``search_document`` too); ``None``: symmetric.

    :raises InputError: for any other name.
    """
    if mode is None:
        return None
    name = ALIASES.get(mode, mode)
    if name not in MODES:
        raise InputError(f"unknown encoding mode {mode!r}; choose one of {', '.join(MODES)}")
    return name


def read_modes(value: object) -> dict[str, ModeSettings]:
    """Modes from ``config.json``'s ``modes`` entry (or ``with_modes``' arguments); empty ones left out.

    :raises ModelFormatError: for an entry that is not an object, or an unknown mode or setting.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelFormatError(f"'modes' must be an object of {' and '.join(MODES)} settings, got {value!r}")
    modes = {}
    for mode, settings in value.items():
        if mode not in MODES:
            raise ModelFormatError(
                f"unknown encoding mode {mode!r} (this staticsem knows {', '.join(MODES)})"
            )
        if settings is not None and (parsed := ModeSettings.from_config(mode, settings)).config():
            modes[mode] = parsed
    return modes


def modes_config(modes: Modes) -> dict[str, dict[str, Any]]:
    """The ``modes`` entry of ``config.json`` (empty: nothing to write)."""
    return {mode: modes[mode].config() for mode in MODES if mode in modes}


@dataclass(frozen=True)
class RowSet:
    """Rows of the modes' own: ``vectors`` one per word (V × D, float32, float16, or int8 with ``scales``
    one per row), ``pieces`` one per subword piece for models with pieces (else ``None``). An int8 set is
    saved as int8, its pieces too (each with its rows' scales); in memory its pieces stay float."""

    vectors: np.ndarray
    pieces: np.ndarray | None = None
    scales: np.ndarray | None = None

    def quantized(self) -> RowSet:
        """This set as int8 with one scale per row (its pieces kept float until saved)."""
        vectors, scales = quantize(dequantize(self.vectors, self.scales), DType.INT8)
        return RowSet(vectors, self.pieces, scales)

    def select(self, keep: np.ndarray) -> RowSet:
        """The rows of words ``keep`` (pieces unchanged)."""
        return RowSet(self.vectors[keep], self.pieces, None if self.scales is None else self.scales[keep])

    def truncate(self, dim: int) -> RowSet:
        """The rows keeping the first ``dim`` dimensions (an int8 set keeps its rows' scales)."""
        cut = None if self.pieces is None else np.ascontiguousarray(self.pieces[:, :dim])
        return RowSet(np.ascontiguousarray(self.vectors[:, :dim]), cut, self.scales)


def check_modes(
    modes: Modes,
    pieces: PieceTable | None,
    row_sets: Mapping[str, RowSet] | None = None,
    shape: tuple[int, int] | None = None,
) -> None:
    """Raise ``ModelFormatError`` when a mode sets what the model lacks (a piece weight without pieces, a
    row set it does not hold) or a row set does not fit the model (``shape``: its words × dims)."""
    if pieces is None and any(s.piece_weight is not None for s in modes.values()):
        raise ModelFormatError(
            "a mode sets piece_weight but the model has no subword pieces (SWE models with "
            "--fallback pieces have them)"
        )
    row_sets = row_sets or {}
    for name in row_sets:
        if not isinstance(name, str) or not ROW_NAME.fullmatch(name):
            raise ModelFormatError(f"a row set's name must be letters, digits, _ or -, got {name!r}")
    for mode, settings in modes.items():
        if settings.rows is not None and settings.rows not in row_sets:
            raise ModelFormatError(
                f"mode {mode!r} encodes with rows {settings.rows!r}, which the model lacks"
            )
    for name, rows in row_sets.items():
        want = {
            "rows": shape,
            "pieces": None if pieces is None else (len(pieces.vectors), pieces.vectors.shape[1]),
        }
        for part, array in (("rows", rows.vectors), ("pieces", rows.pieces)):
            got = None if array is None else array.shape
            if got != want[part] or (array is not None and not np.isfinite(array).all()):
                raise ModelFormatError(
                    f"row set {name!r}: its {part} have shape {got} (finite), the model needs {want[part]}"
                )
        scales = rows.scales
        if (scales is not None) != (rows.vectors.dtype == np.int8) or (
            scales is not None and (scales.shape != (len(rows.vectors),) or not np.isfinite(scales).all())
        ):
            raise ModelFormatError(
                f"row set {name!r}: int8 rows need one finite scale per row, and only int8 rows have scales"
            )


def both_modes_with(modes: Modes, **settings: Any) -> dict[str, dict[str, Any]]:
    """The query and document modes' settings with ``settings`` in place (e.g. ``piece_weight=0.75``),
    each mode's others (its own rows) kept: arguments for ``StaticModel.with_modes``."""
    return {mode: {**(modes[mode].config() if mode in modes else {}), **settings} for mode in MODES}


def describe_modes(modes: Modes) -> str:
    """One line: each mode's settings, or that every mode encodes as ``encode``."""
    if not modes:
        return "none (queries and documents encode as encode)"
    return "; ".join(
        f"{mode}: " + ", ".join(f"{key} {_shown(value)}" for key, value in modes[mode].config().items())
        for mode in MODES
        if mode in modes
    )


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def encoder_for(encoder: Any, mode: str | None) -> Callable[[list[str]], Any]:
    """``encoder``'s method for ``mode`` (``parse_mode``'s names): ``encode_query`` / ``encode_document``
    where it has them, else (and for ``None``) ``encode``: an encoder without modes encodes all alike."""
    name = parse_mode(mode)
    method = getattr(encoder, f"encode_{name}", None) if name else None
    return method or encoder.encode


class _Moded(Protocol):
    """What a mode variant needs of a model (``StaticModel``; named so to keep modes.py below it)."""

    @property
    def modes(self) -> Mapping[str, ModeSettings]: ...

    @property
    def row_sets(self) -> Mapping[str, RowSet]: ...

    @property
    def pieces(self) -> PieceTable | None: ...

    def with_rows(
        self: Model, vectors: np.ndarray | None, pieces: PieceTable | None, scales: np.ndarray | None = None
    ) -> Model: ...


Model = TypeVar("Model", bound=_Moded)


def mode_variant(model: Model, mode: str) -> Model | None:
    """A model encoding as ``mode`` (its rows or piece weight in place of ``model``'s, the rest shared);
    ``None`` when ``mode`` changes nothing."""
    from staticsem.pieces import PieceTable

    settings, pieces = model.modes.get(mode), model.pieces
    if settings is None:
        return None
    rows = None if settings.rows is None else model.row_sets[settings.rows]
    if pieces is not None and (rows is not None or settings.piece_weight not in (None, pieces.weight)):
        weight = pieces.weight if settings.piece_weight is None else settings.piece_weight
        table = pieces.vectors if rows is None or rows.pieces is None else rows.pieces
        pieces = PieceTable(table, pieces.tokenizer, weight)
    elif rows is None:
        return None
    if rows is None:
        return model.with_rows(None, pieces)
    return model.with_rows(rows.vectors, pieces, rows.scales)
