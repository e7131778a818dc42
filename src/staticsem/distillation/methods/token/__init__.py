"""Model2Vec-style corpus-free distillation (METHOD.md §3): each word alone through the teacher, PCA, SIF."""

from __future__ import annotations

from staticsem.distillation.method import Method, Need
from staticsem.distillation.methods.token.settings import TokenSettings

TOKEN = Method(
    name="token",
    summary="each vocabulary word alone through the teacher, PCA and Zipf/SIF weights (no corpus)",
    settings=TokenSettings,
    run="staticsem.distillation.methods.token.run:run_token",
    needs=frozenset({Need.TEACHER}),
    needs_out=False,
    examples=("staticsem distill token --out models/m2v-style",),
)
