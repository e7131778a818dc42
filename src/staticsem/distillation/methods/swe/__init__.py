"""SWE (Wada et al. 2025; METHOD.md §1), and its stage 1 alone (ASE): one pipeline, two methods."""

from __future__ import annotations

from staticsem.distillation.method import Method, Need
from staticsem.distillation.methods.swe.settings import ASESettings, SWESettings

SWE = Method(
    name="swe",
    summary="corpus, contextual extraction, sentence PCA, knowledge distillation (Wada et al. 2025)",
    settings=SWESettings,
    run="staticsem.distillation.methods.swe.pipeline:run_swe",
    needs=frozenset({Need.CORPUS, Need.TEACHER, Need.PARALLEL}),
    scalable=True,
    examples=(
        "staticsem distill swe --out models/swe (the embedded dictionary corpus)",
        "staticsem distill swe --corpus wiki.txt.gz --vocab-size 50000 --out models/wiki",
        "staticsem distill swe --corpus wiki.txt.gz --ray auto --out models/wiki (teacher passes on Ray)",
        "staticsem distill swe --teacher /path/to/multilingual-e5-small --prompt query --corpus en=en.txt "
        "--corpus de=de.txt --objective both --parallel en-de.tsv --out models/en-de (cross-lingual)",
    ),
)
ASE = Method(
    name="ase",
    summary="stage 1 alone: aggregated contextual states from any teacher layer (teacher width)",
    settings=ASESettings,
    run="staticsem.distillation.methods.swe.pipeline:run_ase",
    needs=frozenset({Need.CORPUS, Need.TEACHER}),
    scalable=True,
    examples=("staticsem distill ase --layer 2 --corpus wiki.txt.gz --out models/ase",),
)
