"""X2Static (Gupta & Jaggi, ACL 2021; METHOD.md §2): CBOW with negative sampling against teacher contexts."""

from __future__ import annotations

from staticsem.distillation.method import Method, Need
from staticsem.distillation.methods.x2static.settings import X2StaticSettings

X2STATIC = Method(
    name="x2static",
    summary="CBOW with negative sampling against teacher contexts (Gupta & Jaggi 2021; teacher width)",
    settings=X2StaticSettings,
    run="staticsem.distillation.methods.x2static.run:run_x2static",
    needs=frozenset({Need.CORPUS, Need.TEACHER}),
    scalable=True,
    examples=("staticsem distill x2static --context paragraph --corpus wiki.txt.gz --out models/x2s",),
)
