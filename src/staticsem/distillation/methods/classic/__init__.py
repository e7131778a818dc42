"""The classic baselines trained with gensim on the corpus: word2vec (CBOW / skip-gram) and fastText."""

from __future__ import annotations

from staticsem.distillation.method import Method, Need
from staticsem.distillation.methods.classic.settings import FastTextSettings, Word2VecSettings

WORD2VEC = Method(
    name="word2vec",
    summary="gensim's word2vec on the corpus (no teacher)",
    settings=Word2VecSettings,
    run="staticsem.distillation.methods.classic.train:run_word2vec",
    needs=frozenset({Need.CORPUS}),
    needs_out=False,
    examples=("staticsem distill word2vec --skip-gram --corpus wiki.txt.gz --out models/w2v",),
)
FASTTEXT = Method(
    name="fasttext",
    summary="gensim's fastText on the corpus: n-gram vectors for unseen words (no teacher)",
    settings=FastTextSettings,
    run="staticsem.distillation.methods.classic.train:run_fasttext",
    needs=frozenset({Need.CORPUS}),
    needs_out=False,
    examples=("staticsem distill fasttext --corpus wiki.txt.gz --out models/ft",),
)
