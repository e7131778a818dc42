"""The settings of pairs training (``staticsem train-pairs``, ``distill --pairs``); light, no torch."""

from __future__ import annotations

from dataclasses import dataclass

from staticsem.distillation.method import setting
from staticsem.errors import InputError

INTO = ("modes", "all")


@dataclass(frozen=True)
class PairsSettings:
    """Retrieval training on ``query<TAB>positive[<TAB>negative]`` pairs, anchored by teacher targets."""

    batch_size: int = setting(256, "Pairs per batch (in-batch negatives); the anchor's batch is as large.")
    # 4e-3 with the 2,500-step cap: SciFact 57.45 in 164 s of training (2e-3: 56.96); studies/README.md
    lr: float = setting(4e-3, "Adam learning rate.")
    tau: float = setting(0.05, "Temperature of the ranking loss.")
    # into the modes, SciFact nDCG@10 of the default model: 57.37 by early stopping at 4,300 steps (lr 2e-3,
    # mined negatives, 577 s), 57.45 at 2,500 steps with lr 4e-3 and no mining (164 s): the recipe's time
    # budget (1.15×) holds the stage to about 3 minutes; studies/README.md §pairs_levers.py
    max_steps: int = setting(2_500, "Cap on training steps (early stopping may end sooner).")
    eval_every: int = setting(100, "Steps between dev-loss evaluations.")
    patience: int = setting(5, "Stop after this many evaluations without improvement.")
    dev_size: int = setting(
        2_000, "Held-out pairs (and anchor sentences) for the dev loss (at most a tenth)."
    )
    # off by default: mining 131,631 queries with BM25 takes 2 minutes and moved SciFact by 0.2 at most
    # (57.57 without, 57.37 with, early stopping)
    hard_negatives: bool = setting(
        False, "Mine one hard negative per query with BM25 where the file gives none.", option="mine"
    )
    mine_depth: int = setting(10, "A mined negative is drawn from the query's top hits, this many deep.")
    # 0 by default: trained into the search modes' own rows, encode keeps its similarity anyway, and the
    # anchor costs retrieval (SciFact 55.53 with it at 1, 55.93 without, 2,000 steps); with --pairs-into
    # all it keeps similarity (STS mean 73.48 at 1 against 72.57)
    anchor_weight: float = setting(
        0.0,
        "Weight of the distillation anchor (the teacher's in-batch similarities) beside the pairs' loss; "
        "give it one (1) with --pairs-into all.",
    )
    anchor_sentences: int = setting(100_000, "Anchor sentences drawn from --kd-corpus (train-pairs).")
    train_pieces: bool = setting(True, "Train the subword pieces' rows too (off: they stay as built).")
    matryoshka: tuple[int, ...] = setting(
        (),
        "Also rank at these leading dimensions (e.g. 64,128), so --dims truncation keeps quality.",
        comma=True,
    )
    per_file: int = setting(0, "At most this many pairs from each file (0: all).")
    into: str = setting(
        "modes",
        "Where the trained rows go: 'modes' (rows of encode_query/encode_document's own; encode keeps the "
        "model's, so similarity holds) or 'all' (they replace the model's rows).",
    )
    seed: int = setting(0, "Set from the run's seed.", hidden=True)

    def __post_init__(self) -> None:  # the CLI gives comma-separated dimensions as strings
        try:
            object.__setattr__(self, "matryoshka", tuple(int(d) for d in self.matryoshka))
        except ValueError:
            raise InputError(f"--pairs-matryoshka takes dimensions, got {self.matryoshka}") from None

    def validate(self, dim: int | None = None) -> None:
        """Raise InputError for a setting out of range (``dim``: the model's width, for --matryoshka)."""
        positive = {"batch-size": self.batch_size, "eval-every": self.eval_every, "patience": self.patience}
        for name, value in positive.items():
            if value < 1:
                raise InputError(f"--pairs-{name} must be at least 1, got {value}")
        if self.batch_size < 2:
            raise InputError(
                f"--pairs-batch-size must be at least 2 (in-batch negatives), got {self.batch_size}"
            )
        if not self.lr > 0 or not self.tau > 0:
            raise InputError(f"--pairs-lr and --pairs-tau must be positive, got {self.lr} and {self.tau}")
        if self.anchor_weight < 0 or self.max_steps < 0 or self.per_file < 0 or self.mine_depth < 1:
            raise InputError(
                "--pairs-anchor-weight, --pairs-max-steps and --pairs-per-file take values >= 0, "
                "--pairs-mine-depth >= 1"
            )
        if self.into not in INTO:
            raise InputError(f"--pairs-into takes {' or '.join(INTO)}, got {self.into!r}")
        if dim is not None and any(not 1 <= d <= dim for d in self.matryoshka):
            raise InputError(f"--pairs-matryoshka dimensions must be within 1..{dim}, got {self.matryoshka}")
