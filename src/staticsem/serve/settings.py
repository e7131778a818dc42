"""Server settings: the request limits and what to serve, in one object the CLI flags and the tests share."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from staticsem.errors import InputError

# Worker processes (``--workers N``) rebuild the app from this environment variable.
SETTINGS_ENV = "STATICSEM_SERVE_SETTINGS"


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; a request over a limit is answered 413/422 naming it."""

    max_inputs: int = 2048  # texts per request (embeddings, similarity, documents)
    max_chars: int = 32_768  # characters per text
    max_body_bytes: int = 8 * 2**20  # request body size
    max_k: int = 1000  # neighbours, analogy answers, search hits
    max_matrix_cells: int = 262_144  # similarity matrix size (rows × columns)
    max_in_flight: int = 64  # requests answered at once; more wait their turn (bounds a burst's memory)
    # index searches run at once (more threads than cores only slow the writer down); writes get one thread
    search_threads: int = field(default_factory=lambda: os.cpu_count() or 1)

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value < 1:
                raise InputError(f"limit {name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class ServeSettings:
    """A model (and optionally a search index) to serve, with its limits and write-access key.

    :param model: model path (any format ``staticsem.load`` reads).
    :param index: search index folder, or ``None`` to serve without ``/search`` and ``/documents``.
    :param api_key_env: name of the environment variable holding the key that write endpoints require;
        ``None`` refuses every write.
    :param name: the model name reported by ``/v1/embeddings`` and ``/info`` (default: the folder name).
    """

    model: Path
    index: Path | None = None
    api_key_env: str | None = None
    name: str | None = None
    limits: Limits = field(default_factory=Limits)

    @property
    def model_name(self) -> str:
        return self.name or self.model.name

    def api_key(self) -> str | None:
        """The configured key, read from the environment each time the app is built.

        :raises InputError: when ``api_key_env`` names an unset or empty variable.
        """
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise InputError(f"--api-key-env {self.api_key_env}: that environment variable is not set")
        return key

    def to_json(self) -> str:
        """JSON for ``SETTINGS_ENV`` (holds the key's variable name, never the key)."""
        data: dict[str, Any] = asdict(self)
        data["model"] = str(self.model)
        data["index"] = None if self.index is None else str(self.index)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        data = json.loads(text)
        index = data.pop("index")
        return cls(
            model=Path(data.pop("model")),
            index=None if index is None else Path(index),
            limits=Limits(**data.pop("limits")),
            **data,
        )
