"""staticsem: static word embeddings optimised for sentence semantics."""

from staticsem import cxxruntime
from staticsem.io import load
from staticsem.model import StaticModel
from staticsem.version import __version__

__all__ = ["Index", "StaticModel", "__version__", "distill", "load"]

cxxruntime.prepare()  # usearch imported after this, then onnxruntime, must not crash (see cxxruntime)


def distill(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Distil a static model from a Sentence Transformer (needs the ``distill`` extra)."""
    from staticsem.distillation import distill as _distill

    return _distill(*args, **kwargs)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """``staticsem.Index`` loads the search subpackage (the ``search`` extra) on first use."""
    if name == "Index":
        from staticsem.search import Index

        return Index
    raise AttributeError(f"module 'staticsem' has no attribute {name!r}")
