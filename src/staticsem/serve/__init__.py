"""The embedding and search server (needs ``pip install 'staticsem[serve]'``).

``create_app(model)`` gives a FastAPI app; ``staticsem serve MODEL`` runs it with uvicorn.
"""

from __future__ import annotations

from importlib.util import find_spec

_MISSING = [name for name in ("fastapi", "uvicorn", "orjson", "fastapi_offline") if find_spec(name) is None]
if _MISSING:
    raise ImportError(f"staticsem.serve needs {', '.join(_MISSING)}: `pip install 'staticsem[serve]'`")

from staticsem.serve.app import create_app  # noqa: E402
from staticsem.serve.settings import Limits, ServeSettings  # noqa: E402

__all__ = ["Limits", "ServeSettings", "create_app"]
