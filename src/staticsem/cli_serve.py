"""The ``staticsem serve`` command (registered in ``staticsem.cli``); FastAPI loads only when it runs."""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from staticsem.errors import InputError
from staticsem.io.hub import REVISION_HELP

if TYPE_CHECKING:
    from staticsem.serve.settings import ServeSettings

logger = logging.getLogger(__name__)

EPILOG = (
    "Examples: `staticsem serve models/demo` (http://127.0.0.1:8000: playground at /, API docs at /docs);  "
    "`STATICSEM_KEY=secret staticsem serve models/demo --index indexes/wiki --api-key-env STATICSEM_KEY "
    "--workers 2`."
)
Limit = Annotated[int, typer.Option(min=1, rich_help_panel="Limits (a request over one is answered 413/422)")]


def serve(
    model: Annotated[
        Path,
        typer.Argument(
            help="Model to serve (any format staticsem reads, or a hub name: org/name); a classifier folder "
            "also serves /classify."
        ),
    ],
    index: Annotated[
        Path | None, typer.Option(help="Search index folder to serve (/search, /documents).")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind; keep 127.0.0.1 unless a proxy guards it.")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="Server processes (each loads the model).")] = 1,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the key for /documents (without it, writes are refused)."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Model name in answers [default: the folder name].")
    ] = None,
    graceful_timeout: Annotated[
        int, typer.Option(min=1, help="Seconds to let in-flight requests finish on shutdown.")
    ] = 30,
    keep_alive: Annotated[
        int, typer.Option(min=1, help="Seconds an idle connection stays open (a slow client's next request).")
    ] = 30,
    access_log: Annotated[bool, typer.Option(help="Log every request.")] = False,
    max_inputs: Limit = 2048,
    max_chars: Limit = 32_768,
    max_body_bytes: Limit = 8 * 2**20,
    max_k: Limit = 1000,
    max_matrix_cells: Limit = 262_144,
    max_in_flight: Annotated[
        int, typer.Option(min=1, help="Requests answered at once; more wait their turn (bounds memory).")
    ] = 64,
    search_threads: Annotated[
        int | None,
        typer.Option(
            min=1, help="Index searches run at once [default: one per core]; writes have their own."
        ),
    ] = None,
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Serve MODEL over HTTP: OpenAI-compatible /v1/embeddings, similarity, words, search, a playground."""
    try:
        from staticsem.serve.settings import Limits, ServeSettings
    except ImportError as exc:
        raise InputError(f"{exc} (staticsem serve needs `pip install 'staticsem[serve]'`)") from None
    limits = Limits(max_inputs, max_chars, max_body_bytes, max_k, max_matrix_cells, max_in_flight)
    if search_threads is not None:
        limits = dataclasses.replace(limits, search_threads=search_threads)
    folder, name = _model(model, revision, name)
    options = dict(
        host=host,
        port=port,
        timeout_graceful_shutdown=graceful_timeout,
        timeout_keep_alive=keep_alive,
        access_log=access_log,
        log_level="info" if access_log else "warning",
        backlog=4096,
    )
    _run(ServeSettings(folder, index, api_key_env, name, limits), workers, options)


def _model(model: Path, revision: str | None, name: str | None) -> tuple[Path, str | None]:
    """The model's folder (a hub name's in the hub's cache) and the name answers give it (a hub name's
    own, not the cache's commit folder)."""
    from staticsem.io.hub import resolve

    folder = resolve(model, revision)
    if name is None and folder != model.expanduser():
        name = str(model) if revision is None else f"{model}@{revision}"
    return folder, name


def _run(settings: ServeSettings, workers: int, options: dict[str, Any]) -> None:
    """Load the app once (a bad path fails here with one line), then run uvicorn: in this process, or in
    ``workers`` processes that each load it from the settings."""
    import uvicorn

    from staticsem.serve.app import app_from_settings
    from staticsem.serve.settings import SETTINGS_ENV

    app = app_from_settings(settings)
    host = options["host"]
    if not _loopback(host):
        logger.warning("binding %s: the server is reachable from other machines", host)
    url = f"http://{host}:{options['port']}"
    typer.echo(f"serving {settings.model_name} on {url} (playground /, API docs /docs)", err=True)
    if workers == 1:
        uvicorn.run(app, **options)
        return
    if app.state.service.index is not None:
        app.state.service.index.close()  # each worker opens its own
    os.environ[SETTINGS_ENV] = settings.to_json()
    uvicorn.run("staticsem.serve.app:app_from_env", factory=True, workers=workers, **options)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
