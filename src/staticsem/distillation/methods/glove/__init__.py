"""GloVe (Pennington, Socher and Manning, 2014) trained on the corpus: the third classic baseline."""

from __future__ import annotations

from staticsem.distillation.method import Method, Need
from staticsem.distillation.methods.glove.settings import GloveSettings

GLOVE = Method(
    name="glove",
    summary="co-occurrence counts and GloVe's weighted least squares on the corpus (no teacher)",
    settings=GloveSettings,
    run="staticsem.distillation.methods.glove.train:run_glove",
    needs=frozenset({Need.CORPUS}),
    needs_out=False,
    examples=("staticsem distill glove --window 10 --corpus wiki.txt.gz --out models/glove",),
)
