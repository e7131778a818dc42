"""The classifier's torch network and what it reads per text (used by ``staticsem.train.fit``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from staticsem.model import StaticModel
from staticsem.quantize import dequantize
from staticsem.train.head import Head


class Inputs:
    """What the network reads per text: fixed features (frozen table) or rows of a compact table."""

    def __init__(
        self, model: StaticModel, train: list[str], dev: list[str], features: np.ndarray, freeze: bool
    ) -> None:
        self.model, self.freeze = model, freeze
        self.table: torch.Tensor | None = None
        self.fixed: np.ndarray | None = None
        if freeze:
            self.train_x = torch.from_numpy(features)
            self.dev_x = torch.from_numpy(model.encode(dev, normalize=True)) if dev else None
            return
        train_ids, train_len = model.row_ids(train)
        dev_ids, dev_len = model.row_ids(dev) if dev else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.rows = np.unique(np.concatenate([train_ids, dev_ids]))
        # composed rows of unknown words (learned subword pieces) are read but stay as they are
        self.fixed = self.rows >= len(model)
        self.table = torch.from_numpy(np.array(model._rows(self.rows), dtype=np.float32))
        self.train_bags = bags(np.searchsorted(self.rows, train_ids), train_len)
        self.dev_bags = bags(np.searchsorted(self.rows, dev_ids), dev_len)

    def batch(self, which: str, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.freeze:
            x = self.train_x if which == "train" else self.dev_x
            assert x is not None
            return x[torch.from_numpy(idx)], None
        bags = self.train_bags if which == "train" else self.dev_bags
        parts = [bags[i] for i in idx]
        lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
        offsets = np.zeros(len(parts), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return torch.from_numpy(flat), torch.from_numpy(offsets)

    def tuned_model(self, net: Net) -> StaticModel:
        """The model with the trained rows written into a float32 copy of its table."""
        model = self.model
        assert net.table is not None and self.fixed is not None
        full = np.array(dequantize(model.vectors, model.scales), dtype=np.float32)
        full[self.rows[~self.fixed]] = net.table.weight.detach().numpy()[~self.fixed]
        return StaticModel(
            model.vocab,
            full,
            tokenizer=model.tokenizer,
            pieces=model.pieces,
            metadata={**model.metadata, "fine_tuned": "classifier"},
            splitter=model.splitter.name,
            tokens=model.tokens,
            normalize=model.normalize,
        )


def bags(ids: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(ids.astype(np.int64), np.cumsum(lengths)[:-1]) if len(lengths) else []


class Net(nn.Module):
    """The rows' sum (when the table trains), L2-normalised and standardised, then the head's layers."""

    def __init__(
        self,
        table: torch.Tensor | None,
        mean: np.ndarray,
        scale: np.ndarray,
        outputs: int,
        dropout: float,
        hidden: int,
        fixed: np.ndarray | None = None,
    ) -> None:
        super().__init__()
        self.table = (
            None if table is None else nn.EmbeddingBag.from_pretrained(table, freeze=False, mode="sum")
        )
        if self.table is not None and fixed is not None and fixed.any():  # these rows get no gradient
            keep = torch.from_numpy(~fixed).to(table.dtype)[:, None]  # type: ignore[union-attr]
            self.table.weight.register_hook(lambda grad: grad * keep)
        self.mean: torch.Tensor
        self.scale: torch.Tensor
        self.register_buffer("mean", torch.from_numpy(np.asarray(mean, np.float32)))
        self.register_buffer("scale", torch.from_numpy(np.asarray(scale, np.float32)))
        dim = int(mean.shape[0])
        self.dropout = nn.Dropout(dropout)
        if hidden:
            self.layers = nn.ModuleList([nn.Linear(dim, hidden), nn.Linear(hidden, outputs)])
        else:
            self.layers = nn.ModuleList([nn.Linear(dim, outputs)])

    def forward(self, x: torch.Tensor, offsets: torch.Tensor | None) -> torch.Tensor:
        if self.table is not None:
            x = F.normalize(self.table(x, offsets), dim=1)
        x = self.dropout((x - self.mean) / self.scale)
        for at, layer in enumerate(self.layers):
            x = layer(x)
            if at < len(self.layers) - 1:
                x = self.dropout(F.relu(x))
        return x

    def _linear(self) -> list[nn.Linear]:
        return [layer for layer in self.layers if isinstance(layer, nn.Linear)]

    def head_numpy(self) -> Head:
        return Head(
            self.mean.numpy().copy(),
            self.scale.numpy().copy(),
            [layer.weight.detach().numpy().copy() for layer in self._linear()],
            [layer.bias.detach().numpy().copy() for layer in self._linear()],
        )
