"""Scale-out on Ray (``pip install 'staticsem[ray]'``): distillation's teacher passes and bulk encoding.

Nothing here imports Ray until a cluster is asked for: ``staticsem distill ... --ray auto`` (or
``distill(..., ray="auto")``) runs word counting, stage-1 extraction and X2Static contexts on the
cluster (``staticsem.scale.distill``); ``staticsem encode MODEL --input PATTERN --output DIR --ray auto``
encodes files with Ray Data (``staticsem.scale.encode``).
"""

from __future__ import annotations

from staticsem.scale.cluster import connect, require_ray

__all__ = ["connect", "require_ray"]
