"""The contract every distillation method keeps: a name, a settings dataclass, what it needs, a run function.

A method's settings dataclass is the single source of its options: each field is typed, has a default
and, in ``metadata["help"]``, the text the CLI shows (``setting`` writes such a field). ``distill`` and the
CLI find methods in the registry (``staticsem.distillation.methods``) and never name one. The run
function is named by its import path, so declaring a method imports neither torch nor its code.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from staticsem.model import StaticModel


class Need(str, Enum):
    """What a method reads besides its settings."""

    CORPUS = "corpus"  # sentences (files, stdin or the embedded corpus)
    TEACHER = "teacher"  # a Sentence Transformer
    PARALLEL = "parallel"  # sentence pairs (swe's contrastive objective; optional)


def setting(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = None, **cli: Any) -> Any:
    """A settings field with its CLI help (``metadata["help"]``) and CLI hints.

    :param cli: ``option`` (the flag's name without ``--``, if not the field's), ``comma`` (a tuple given as
        one comma-separated value), ``hidden`` (set by code, never an option), ``prefix`` (a nested settings
        dataclass whose fields become ``--PREFIX-FIELD`` options).
    """
    metadata = {"help": help, **cli}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Frame:
    """Where and how a method runs: what ``distill`` hands every method beside its settings."""

    out: Path | None = None  # the model folder (its work folder ``.NAME.work`` sits beside it)
    dtype: str = "float16"
    keep_work: bool = True
    work_dir: Path | None = None  # instead of ``.NAME.work`` (runs of one method may share it)
    trust_remote_code: bool = False
    show_progress: bool = True
    scale: Any = None  # a ``staticsem.scale.distill.RayScale`` for the methods that scale, else None
    workers: int | None = None  # processes for the corpus's passes [every core]
    device: str = "auto"  # where the teacher and training run: auto, cpu, cuda or cuda:N

    def work_folder(self) -> Path | None:
        """The work folder: ``work_dir``, else ``.NAME.work`` beside ``out`` (None with neither)."""
        from staticsem.distillation.checkpoint import work_folder

        if self.work_dir is not None:
            return self.work_dir
        return None if self.out is None else work_folder(self.out)


Run = Callable[[Any, Frame], "StaticModel"]


@dataclass(frozen=True)
class Method:
    """One distillation method, as the registry holds it.

    ``run`` is ``"package.module:function"``; the function takes ``(settings, frame)``, saves the model to
    ``frame.out`` (when given) and returns it. ``hidden`` names settings fields the CLI does not offer for
    this method (ase shares swe's settings type but is stage 1 alone).
    """

    name: str
    summary: str
    settings: type[Any]
    run: str
    needs: frozenset[Need] = frozenset()
    needs_out: bool = True  # keeps checkpoints beside the model folder, so ``out`` is required
    scalable: bool = False  # word counting and teacher passes can run on a Ray cluster
    examples: tuple[str, ...] = ()

    def runner(self) -> Run:
        """The run function (its module is imported now, with torch and whatever else it needs)."""
        module, _, name = self.run.partition(":")
        function: Run = getattr(importlib.import_module(module), name)
        return function

    def fields(self) -> Iterator[dataclasses.Field[Any]]:
        """The settings fields this method offers as options (not hidden, not set by code)."""
        for item in dataclasses.fields(self.settings):
            if not item.metadata.get("hidden"):
                yield item


def record(settings: Any, **derived: Any) -> dict[str, Any]:
    """What config.json records as ``settings`` for every method: all fields, then what the run derived."""
    return {**dataclasses.asdict(settings), **derived}


def listing(names: list[str], last: str = " and ") -> str:
    """``a, b and c`` (for messages that name methods or options)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])}{last}{names[-1]}"
