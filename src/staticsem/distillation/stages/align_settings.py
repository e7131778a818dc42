"""The settings of the languages' alignment (``stages.align``, ``methods.swe.alignment``); light, for
settings and the CLI (``--align-*``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from staticsem.distillation.method import setting
from staticsem.errors import InputError

PIECES = ("mean", "fitted")  # the subword pieces' map after the languages' maps
DIRECTIONS = 6  # --align-components by default (at most a quarter of --dim)
# what the models before 2026-11-30 removed (their refinement trained at --kd-lr); the stage functions'
# default (stages.align.COMPONENTS)
EARLIER_COMPONENTS = 4


@dataclass(frozen=True)
class AlignSettings:
    """How a build of several languages maps them onto the teacher's shared space and refines its rows."""

    # the 12-language build, STS-B dev of 7 languages: monolingual 67.69 -> 72.60, en-X 49.09 -> 60.63,
    # English 65.97 -> 68.76 (docs/recipes.md)
    languages: bool = setting(
        True,
        "Several languages: map each onto the teacher's shared space (an affine map fitted on its chosen "
        "sentences, baked into its rows) after the last stage (with --objective kd; parallel pairs align "
        "languages themselves).",
    )
    sentences: int = setting(20_000, "Chosen sentences of each language that fit its map.")
    pieces: str = setting(
        "mean",
        "Several languages: the subword pieces' map (mean: the mean of the languages' maps; fitted: their "
        "own, fitted on every language's sentences read from pieces alone, as a language without text "
        "is read).",
    )
    # the three-language build (en, de, ja), STS-B dev at --align-lr 5e-4, 2 / 4 / 6 / 8 directions: en-ja
    # 58.75 / 60.38 / 61.01 / 61.08, en-de 64.18 / 64.64 / 65.57 / 65.80, ja's translations found (top-1)
    # 70.69 / 71.13 / 70.38 / 69.26: 6 keeps most of 8's STS at 40 % of its retrieval cost (docs/recipes.md)
    components: int | None = setting(
        None,
        "Principal directions of each language removed before and after its map, and from the teacher "
        f"embeddings its refinement trains towards [default: {DIRECTIONS}, at most a quarter of --dim].",
    )
    # then the rows trained so each chosen and short sentence's mean points at its teacher embedding in the
    # shared space (cosine; the 12-language build: monolingual 72.60 -> 75.13, en-X 60.63 -> 63.64, English
    # 68.76 -> 71.00)
    steps: int = setting(
        30_000,
        "Several languages, after the maps: steps training the rows so each sentence's mean points at its "
        "teacher embedding in the shared space (0: the maps alone; --kd-batch-size applies).",
    )
    # three languages, 8 directions: 1e-3 -> 5e-4 gives en-ja 60.67 -> 61.08 at 11,080 steps (2.5e-4:
    # 61.34 at 21,840, twice the time); 4 directions: 59.92 -> 60.38, ja's translations found 70.67 -> 71.13
    lr: float = setting(5e-4, "The refinement's Adam learning rate.")

    def validate(self, fallback: str, dim: int) -> None:
        """Raise ``InputError`` for settings that cannot work (in a build of ``dim`` dimensions whose
        unknown words take ``fallback``)."""
        if self.sentences <= dim:  # a map of dim dimensions needs more sentences than that
            raise InputError(f"--align-sentences must be above --dim {dim}, got {self.sentences}")
        if self.pieces not in PIECES:
            raise InputError(f"--align-pieces must be one of {', '.join(PIECES)}, got {self.pieces!r}")
        if self.pieces == "fitted" and fallback != "pieces":
            raise InputError("--align-pieces fitted maps the subword pieces: it needs --fallback pieces")
        if self.steps < 0:
            raise InputError(f"--align-steps must be 0 or more, got {self.steps}")
        if self.components is not None and not 0 <= self.components < dim:
            raise InputError(
                f"--align-components must be 0 or more and below --dim {dim}, got {self.components}"
            )
        if not self.lr > 0:
            raise InputError(f"--align-lr must be positive, got {self.lr}")

    def directions(self, dim: int) -> int:
        """``components``, by default ``DIRECTIONS`` but at most a quarter of the model's ``dim``."""
        return min(DIRECTIONS, dim // 4) if self.components is None else self.components

    def key(self, last: str, seed: int, kd_lr: float, dim: int) -> dict[str, Any]:
        """What the alignment's key holds: the last stage's key (``kd_lr``: its learning rate), these
        settings (for a model of ``dim`` dimensions) and the seed. Settings added later count only where
        they differ from what the models before them did (4 components, the refinement at ``kd_lr``), so
        those models keep their keys."""
        key: dict[str, Any] = {"last": last, "sentences": self.sentences, "seed": seed}
        if self.pieces != "mean":
            key["pieces"] = self.pieces
        directions = self.directions(dim)
        if directions != EARLIER_COMPONENTS:
            key["components"] = directions
        if self.lr != kd_lr:
            key["lr"] = self.lr
        if self.steps:
            key["steps"] = self.steps
        return key
