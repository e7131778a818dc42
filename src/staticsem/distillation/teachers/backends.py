"""The names of the teacher backends (what runs a teacher's transformer) and precisions; light, for settings
and the CLI (``device.resolve_runtime`` turns ``auto`` into what runs here)."""

from __future__ import annotations

from staticsem.errors import InputError

BACKENDS = ("torch", "onnx", "onnx-int8")
AUTO = "auto"
# the CPU's default, fastest there; SWE STS mean +0.04 vs torch (benchmarks/teacher_backends.py)
DEFAULT_BACKEND = "onnx-int8"
PRECISIONS = (AUTO, "bf16", "fp16", "fp32")
OWN_PRECISION = {"onnx": "fp32", "onnx-int8": "int8"}  # what each onnx backend runs at
BACKEND_HELP = (
    "What runs the teacher: auto (torch on a GPU, else onnx-int8), torch, onnx (ONNX Runtime, same states) "
    "or onnx-int8 (int8 weights, fastest on the CPU)."
)
PRECISION_HELP = (
    "The teacher's arithmetic with the torch backend: bf16, fp16 or fp32 [auto: fp16 on a GPU, fp32 on the "
    "CPU]; the onnx backends run at their own (onnx fp32, onnx-int8 int8)."
)


def check_backend(name: str, allow_auto: bool = False) -> str:
    """Return ``name`` if it is a teacher backend (or ``auto``, where allowed), else raise ``InputError``."""
    if name not in BACKENDS and not (allow_auto and name == AUTO):
        choices = (AUTO, *BACKENDS) if allow_auto else BACKENDS
        raise InputError(f"unknown teacher backend {name!r}; choose one of {', '.join(choices)}")
    return name


def check_teacher(backend: str, precision: str) -> None:
    """Raise ``InputError`` for a backend or precision that is not one, or a precision the backend does not
    run at (``--teacher-precision`` on an onnx backend is refused, naming the backend)."""
    check_backend(backend, allow_auto=True)
    if precision not in (*PRECISIONS, *OWN_PRECISION.values()):
        raise InputError(f"--teacher-precision takes {', '.join(PRECISIONS)}; got {precision!r}")
    own = OWN_PRECISION.get(backend)
    if own is not None and precision not in (AUTO, own):
        raise InputError(
            f"--teacher-precision {precision}: the {backend} teacher backend runs at its own precision "
            f"({own}); use --teacher-backend torch (or auto) for {precision}"
        )
    if backend in ("torch", AUTO) and precision == "int8":
        raise InputError(
            "--teacher-precision int8 is the onnx-int8 backend's; use --teacher-backend onnx-int8"
        )


def backend_key(backend: str, precision: str = "fp32") -> dict[str, str]:
    """What a step's key gains from the teacher backend and precision: nothing for torch at fp32 (older keys
    stay valid), the backend for the onnx ones (their precision is their own)."""
    if backend != "torch":
        return {"backend": backend}
    return {} if precision in ("fp32", AUTO) else {"backend": backend, "precision": precision}
