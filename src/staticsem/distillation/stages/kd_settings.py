"""The settings of stage 3 (distillation and contrastive training); light, for settings and the CLI."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from staticsem.distillation.method import setting
from staticsem.errors import InputError

WHOLE_PAIRS = ("all", "families")  # the pairs the whole-batch loss ranks
# the unset settings of a distillation without edit families: those of the models before 2026-11-30
PLAIN_TRAINING: dict[str, Any] = {"whole": 0.0, "whole_pairs": "all", "group_share": 0.0, "patience": 5}
# ... and with them (the one-language default): three seeds of the English recipe, STS mean 74.44 ->
# 75.11, word similarity 71.83 -> 71.80, classification 81.47 -> 81.10 (studies/README.md §phrases.py)
FAMILY_TRAINING: dict[str, Any] = {
    "whole": 1.0,
    "whole_pairs": "families",
    "group_share": 0.5,
    "patience": 10,
}


@dataclass(frozen=True)
class KDSettings:
    """Training settings (METHOD.md §1, stage 3a); the swe CLI offers them as ``--kd-*``."""

    tau: float = setting(
        0.05, "Temperature of the distillation and contrastive losses [0.07 helps --kd-corpus]."
    )
    lr: float = setting(1e-3, "Adam learning rate.")
    batch_size: int = setting(128, "Sentences per training batch.")
    clip: float = setting(5.0, "Gradient-norm clip.")
    eval_every: int = setting(40, "Steps between dev-loss evaluations.")
    patience: int | None = setting(
        None, "Stop after this many evaluations without improvement [default: 10 with edit families, else 5]."
    )
    max_steps: int = setting(30_000, "Cap on distillation steps.")
    dev_size: int = setting(10_000, "Held-out sentences for the dev loss (at most a tenth).")
    seed: int = setting(0, "Set from the run's seed.", hidden=True)
    # sparse gradients + lazy Adam: only the batch's rows move (≈ 10× faster at 50k words)
    lazy: bool = setting(True, "Sparse gradients and lazy Adam (off: the paper's dense Adam).")
    # Subtract the mean teacher embedding before the cosines: teachers whose sentences all share one
    # direction (e5: cosine 0.76 ± 0.03 between random sentences) otherwise give near-uniform targets,
    # and the student collapses (e5 STS-B 54.8 uncentred, 73.0 centred; MiniLM 70.2 either way)
    center_targets: bool = setting(True, "Subtract the mean teacher embedding before the cosines.")
    # Neighbour groups: this share of every batch is made of ``group_size``-sentence groups, a random seed
    # and its nearest teacher neighbours among ``group_pool`` random training sentences (hard negatives:
    # the fine distinctions STS pairs test); 0 keeps plain random batches
    group_share: float | None = setting(
        None,
        "Share of each distillation batch made of neighbour groups (a random sentence and its 7 nearest "
        "by teacher embedding: hard negatives) [default: 0.5 with edit families, else 0: random batches; "
        "1 helps --kd-corpus].",
        option="groups",
    )
    group_size: int = setting(8, "Sentences per neighbour group.")
    # Edit families (``corpus.edits``): this share of every batch is whole families, a short sentence and
    # its edited copies; set by the pipeline from ``--edit-share`` where the build has edits
    family_share: float = setting(0.0, "Share of each batch made of whole edit families.", hidden=True)
    group_pool: int = setting(16_384, "Random training sentences a group's neighbours are drawn from.")
    # Weight averaging: at every evaluation the kept and scored table is an exponential moving average
    # (this decay per evaluation) of the trained one, not the trained one itself; 0 scores the latter
    average: float = setting(
        0.0,
        "Keep a moving average of the table being distilled (this decay per evaluation, every 40 steps) "
        "instead of the table itself [0: off; 0.95 helps --kd-corpus].",
    )
    # The whole batch's pairs as one distribution besides each row's own: the per-row loss is blind to how
    # one sentence's similarities compare with another's, the whole-batch one ranks every pair of the
    # batch (an edit family's pairs against other sentences' pairs) as the teacher does
    whole: float | None = setting(
        None,
        "Weight of a second distillation loss over all the batch's pairs at once, which ranks pairs of "
        "different sentences as the teacher does [default: 1 with edit families, else 0: off].",
    )
    # ... over every pair of the batch, or only the pairs that hold a sentence of an edit family (its
    # copies against each other and against the batch), as a training signal alone: random pairs are
    # left to each row's loss, and so is the dev loss that keeps the table (studies/README.md §phrases.py)
    whole_pairs: str | None = setting(
        None,
        "Which pairs the --kd-whole loss ranks: all the batch's, or families (those holding a sentence of "
        "an edit family; then it trains only, the kept table is the rows' loss's best) [default: families "
        "with edit families, else all].",
    )

    def resolved(self, families: bool) -> KDSettings:
        """These settings with those left unset chosen for a distillation with edit ``families`` or without
        (``FAMILY_TRAINING`` / ``PLAIN_TRAINING``); set ones kept."""
        chosen = dict(FAMILY_TRAINING if families else PLAIN_TRAINING)
        if self.whole is not None and not self.whole:  # the whole-batch loss turned off: no pairs to rank
            chosen["whole_pairs"] = "all"
        return replace(self, **{k: v for k, v in chosen.items() if getattr(self, k) is None})

    # the settings as training reads them: unset ones as without edit families
    def _read(self, name: str) -> Any:
        value = getattr(self, name)
        return PLAIN_TRAINING[name] if value is None else value

    @property
    def whole_weight(self) -> float:
        return float(self._read("whole"))

    @property
    def pairs_ranked(self) -> str:
        return str(self._read("whole_pairs"))

    @property
    def groups(self) -> float:
        return float(self._read("group_share"))

    @property
    def stale_limit(self) -> int:
        return int(self._read("patience"))

    def validate(self, flag: str = "--kd-") -> None:
        """Raise ``InputError`` for a setting training cannot run with (``flag``: the options' prefix); unset
        settings count as they are without edit families."""
        if self.batch_size < 2:
            raise InputError(f"{flag}batch-size must be at least 2 (in-batch losses), got {self.batch_size}")
        for name, value in (
            ("eval-every", self.eval_every),
            ("patience", self.stale_limit),
            ("group-pool", self.group_pool),
        ):
            if value < 1:
                raise InputError(f"{flag}{name} must be at least 1, got {value}")
        if self.max_steps < 0 or self.dev_size < 0:
            raise InputError(
                f"{flag}max-steps and {flag}dev-size take values >= 0, "
                f"got {self.max_steps} and {self.dev_size}"
            )
        if not (self.whole_weight >= 0 and math.isfinite(self.whole_weight)):
            raise InputError(f"{flag}whole takes a weight >= 0, got {self.whole_weight}")
        if self.pairs_ranked not in WHOLE_PAIRS:
            raise InputError(f"{flag}whole-pairs takes {' or '.join(WHOLE_PAIRS)}, got {self.whole_pairs!r}")
        if not self.lr > 0 or not self.clip > 0:
            raise InputError(f"{flag}lr and {flag}clip must be positive, got {self.lr} and {self.clip}")
