"""The names of the teacher backends (what runs a teacher's transformer); light, for settings and the CLI."""

from __future__ import annotations

from staticsem.errors import InputError

BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"  # fastest; SWE STS mean +0.04 vs torch (benchmarks/teacher_backends.py)


def check_backend(name: str) -> str:
    """Return ``name`` if it is a teacher backend, else raise ``InputError``."""
    if name not in BACKENDS:
        raise InputError(f"unknown teacher backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return name


def backend_key(backend: str) -> dict[str, str]:
    """What a step's key gains from the teacher backend: nothing for torch (older keys stay valid)."""
    return {} if backend == "torch" else {"backend": backend}
