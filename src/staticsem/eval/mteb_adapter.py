"""A staticsem model (or any ``Encoder``) as an encoder of the ``mteb`` package.

>>> import mteb
>>> from staticsem.eval.mteb_adapter import MTEBEncoder
>>> results = mteb.evaluate(MTEBEncoder("models/demo"), mteb.get_tasks(tasks=["STSBenchmark"]))

MTEB hands the encoder batches of ``{"text": [...]}``; the adapter encodes them in one call and scores
with cosine similarity (set in the model metadata, so MTEB never calls ``StaticModel.similarity``,
which compares two texts, not two matrices). Needs ``pip install 'staticsem[eval]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction

from staticsem.eval.base import Encoder
from staticsem.eval.encoders import display_name, encoder_info, load_encoder
from staticsem.modes import encoder_for
from staticsem.version import __version__

if TYPE_CHECKING:
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import PromptType
    from torch.utils.data import DataLoader


class MTEBEncoder(AbsEncoder):
    """Wrap ``model`` (an encoder, or a specification ``load_encoder`` reads) for ``mteb.evaluate``.

    :param model: a ``StaticModel`` or other encoder, or a path / ``st:NAME`` specification.
    :param name: the model name MTEB records, ``organisation/model`` (default ``staticsem/<folder>``).
    """

    def __init__(self, model: Encoder | str | Path, name: str | None = None) -> None:
        if isinstance(model, (str, Path)):
            label = display_name(str(model)).replace("/", "-").replace(":", "-")
            model = load_encoder(str(model))
        else:
            label = str(model.metadata.get("name", "model")) if hasattr(model, "metadata") else "model"
        self.model: Encoder = model
        info = encoder_info(model)
        words, dim = info.get("words"), info.get("dim")
        self.mteb_model_meta = ModelMeta.create_empty(
            overwrites={
                "name": name or f"staticsem/{label}",
                "revision": f"staticsem-{__version__}",
                "embed_dim": dim,
                "n_parameters": words * dim if words and dim else None,
                "similarity_fn_name": ScoringFunction.COSINE,
                "framework": ["NumPy"],
                "use_instructions": False,
            }
        )

    def encode(
        self,
        inputs: DataLoader[Any],
        *,
        task_metadata: TaskMetadata,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Encode every text of ``inputs`` (MTEB's batches of ``{"text": [...]}``) in one call; retrieval's
        queries and documents in their modes (``encode_query`` / ``encode_document``) where the model has
        them."""
        texts = [text for batch in inputs for text in batch["text"]]
        encode = encoder_for(self.model, getattr(prompt_type, "value", None))
        return np.asarray(encode(texts), dtype=np.float32)
