"""Where a teacher runs and at what precision: ``--device auto|cpu|cuda|cuda:N`` and
``--teacher-precision auto|bf16|fp16|fp32`` resolved against what torch sees.

``auto`` means CUDA where torch sees a GPU. On CUDA the teacher runs in torch (``--teacher-backend auto`` →
``torch``) at fp16 unless asked otherwise; on the CPU the default stays ONNX Runtime with int8 weights
(``onnx-int8``), whose precision is its own: asking that backend for another is refused, naming it. A teacher
that cannot be exported to ONNX runs on torch (fp32) when the backend was left to ``auto`` (said in one line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from staticsem.distillation.teachers.backends import AUTO, DEFAULT_BACKEND, OWN_PRECISION, check_teacher
from staticsem.errors import InputError

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
DEVICE_HELP = (
    "Where the teacher and training run: auto (CUDA where torch sees a GPU, else the CPU), cpu, cuda or "
    "cuda:N."
)


def check_device(name: str) -> str:
    """``name`` if it names a device (``auto``, ``cpu``, ``cuda``, ``cuda:N``), else ``InputError``."""
    if not _DEVICE.match(name):
        raise InputError(f"--device takes {', '.join(DEVICES)}; got {name!r}")
    return name


def _seen() -> str:
    """What torch sees, in words, for an error message."""
    import torch

    built = f"a build with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} ({built}) sees no CUDA device"
    return f"torch {torch.__version__} sees {torch.cuda.device_count()} CUDA device(s)"


def resolve_device(name: str = "auto") -> str:
    """The torch device ``name`` means here: ``auto`` → ``cuda`` where torch sees a GPU, else ``cpu``.

    :raises InputError: for CUDA where torch sees none (or not that many), naming what it sees.
    """
    import torch

    check_device(name)
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        index = int(name.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise InputError(f"--device {name}: {_seen()}")
    return name


@dataclass(frozen=True)
class Runtime:
    """A teacher's resolved device, backend and precision."""

    device: str
    backend: str
    precision: str  # bf16, fp16, fp32 (torch) or the onnx backend's own (fp32, int8)
    fallback: bool = False  # the backend was left to auto: torch may run a teacher ONNX cannot export

    def ran(self, backend: str, precision: str) -> Runtime:
        """This runtime as a teacher made with it runs (torch fp32 where it fell back)."""
        if (backend, precision) == (self.backend, self.precision):
            return self
        return replace(self, backend=backend, precision=precision, fallback=False)

    def describe(self) -> str:
        """In words, for logs and the model card (``cuda:0 (NVIDIA H200), torch fp16``)."""
        where = {"ray": "Ray replicas (CPU)", "ray-gpu": "Ray replicas (GPU)"}.get(self.device, self.device)
        if where.startswith("cuda"):
            import torch

            where = f"{where} ({torch.cuda.get_device_name(torch.device(where))})"
        return f"{where}, {self.backend} {self.precision}"


def resolve_runtime(device: str, backend: str, precision: str = AUTO) -> Runtime:
    """The device, teacher backend and precision that ``device``, ``backend`` and ``precision`` (each may
    be ``auto``) mean here.

    :raises InputError: for CUDA without a GPU, an onnx backend on CUDA or given another precision.
    """
    check_teacher(backend, precision)
    where = device if device in ("ray", "ray-gpu") else resolve_device(device)  # Ray: the replicas' own
    on_gpu = where.startswith("cuda") or where == "ray-gpu"
    chosen = backend == AUTO
    if backend == AUTO:
        # a precision asked for is the torch backend's (int8 is onnx-int8's); else the device's default
        if precision == AUTO:
            backend = "torch" if on_gpu else DEFAULT_BACKEND
        else:
            backend = "onnx-int8" if precision == "int8" else "torch"
    if backend != "torch":
        if where.startswith("cuda"):
            raise InputError(
                f"the {backend} teacher backend runs on the CPU; use --teacher-backend torch (or auto) "
                f"on {where}"
            )
        return Runtime(where, backend, OWN_PRECISION[backend], fallback=chosen)
    if precision == AUTO:
        precision = "fp16" if on_gpu else "fp32"
    return Runtime(where, backend, precision)


def torch_dtype(precision: str) -> object:
    """The torch dtype of a torch-backend precision."""
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
