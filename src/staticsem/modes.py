"""Encoding by purpose: ``query`` and ``document`` modes beside the symmetric ``encode``.

Retrieval can encode a search query and the documents it searches differently (sentence-transformers'
``encode_query`` / ``encode_document``, hosted APIs' ``input_type``): learned subword pieces help retrieval
at full weight and sentence similarity at a lower one. A model folder's ``config.json`` keeps each mode's
settings under ``modes``, only those a mode changes::

    "modes": {"query": {"piece_weight": 1.0}, "document": {"piece_weight": 1.0}}

``piece_weight`` replaces the pieces' weight (``PieceTable.weight``) in that mode. A mode without settings
(and every mode of a model without ``modes``) encodes exactly as ``encode``. A reader refuses a mode or a
setting it does not know, naming it, rather than encode without it: a later staticsem can add settings
(term weights, rows of a mode's own) and older files still read the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from staticsem.errors import InputError, ModelFormatError

if TYPE_CHECKING:
    from staticsem.pieces import PieceTable

MODES = ("query", "document")
ALIASES = {"search_query": "query", "search_document": "document"}  # Cohere's and Nomic's names


@dataclass(frozen=True)
class ModeSettings:
    """How one mode encodes where it differs from ``encode``; ``None`` keeps the model's own setting.

    :param piece_weight: the weight of an unknown word's pieces (0..1; see ``staticsem.pieces``).
    :raises ModelFormatError: for a weight that is not a number within 0..1.
    """

    piece_weight: float | None = None

    def __post_init__(self) -> None:
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


def check_modes(modes: Modes, pieces: PieceTable | None) -> None:
    """Raise ``ModelFormatError`` when a mode sets what the model lacks (a piece weight without pieces)."""
    if pieces is None and any(s.piece_weight is not None for s in modes.values()):
        raise ModelFormatError(
            "a mode sets piece_weight but the model has no subword pieces (SWE models with "
            "--fallback pieces have them)"
        )


def describe_modes(modes: Modes) -> str:
    """One line: each mode's settings, or that every mode encodes as ``encode``."""
    if not modes:
        return "none (queries and documents encode as encode)"
    return "; ".join(
        f"{mode}: " + ", ".join(f"{key} {value:g}" for key, value in modes[mode].config().items())
        for mode in MODES
        if mode in modes
    )


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
    def pieces(self) -> PieceTable | None: ...

    def with_pieces(self: Model, pieces: PieceTable) -> Model: ...


Model = TypeVar("Model", bound=_Moded)


def mode_variant(model: Model, mode: str) -> Model | None:
    """A model sharing ``model``'s rows that encodes as ``mode``; ``None`` when ``mode`` changes nothing."""
    from staticsem.pieces import PieceTable

    settings, pieces = model.modes.get(mode), model.pieces
    if settings is None or pieces is None or settings.piece_weight in (None, pieces.weight):
        return None
    assert settings.piece_weight is not None
    return model.with_pieces(PieceTable(pieces.vectors, pieces.tokenizer, settings.piece_weight))
