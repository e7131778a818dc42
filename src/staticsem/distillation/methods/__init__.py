"""The registry of distillation methods: ``distill`` and the CLI find every method here, by name.

Each method is a package of its own (``swe/`` also declares ``ase``, its stage 1 alone; ``classic/``
declares word2vec and fastText) whose ``__init__`` declares a ``Method``: its name, its settings
dataclass and where its run function lives. Declaring imports no torch; running does. Another package can
add a method with ``register_method`` (a method never imports another: what two share is a stage or
machinery).
"""

from __future__ import annotations

from staticsem.distillation.method import Method
from staticsem.distillation.methods.classic import FASTTEXT, WORD2VEC
from staticsem.distillation.methods.glove import GLOVE
from staticsem.distillation.methods.swe import ASE, SWE
from staticsem.distillation.methods.token import TOKEN
from staticsem.distillation.methods.x2static import X2STATIC
from staticsem.errors import InputError

_REGISTRY: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add ``method`` to the registry (a name registered twice is refused) and return it."""
    if method.name in _REGISTRY and _REGISTRY[method.name] is not method:
        raise ValueError(f"a distillation method named {method.name!r} is registered already")
    _REGISTRY[method.name] = method
    return method


def get_method(name: str) -> Method:
    """The method called ``name``.

    :raises InputError: for a name no method has (the message lists the methods).
    """
    try:
        return _REGISTRY[str(name)]
    except KeyError:
        raise InputError(f"unknown method {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def methods() -> tuple[Method, ...]:
    """Every registered method, in the order of registration (the built-in ones first, swe the default)."""
    return tuple(_REGISTRY.values())


for _method in (SWE, ASE, X2STATIC, TOKEN, WORD2VEC, FASTTEXT, GLOVE):
    register_method(_method)

__all__ = ["Method", "get_method", "methods", "register_method"]
