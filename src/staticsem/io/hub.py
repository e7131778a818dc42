"""Models by Hugging Face hub name, and publishing a model folder to the hub.

``resolve`` turns what the user typed into a local path: a path that exists is used as it is; an
``org/name`` that is no path is downloaded by ``huggingface_hub.snapshot_download`` into its cache (the
token comes from the environment, ``HF_TOKEN`` or ``hf auth login``; ``HF_HUB_OFFLINE=1`` reads the cache
only), and the folder is then read like any other (``staticsem.io.detect``). ``push_folder`` uploads a model
folder with a generated model card (``staticsem.io.card``), ``push_model`` a model (what
``StaticModel.push_to_hub`` hands over); ``staticsem.io.push`` takes any model path. Nothing here loads a
model. ``huggingface_hub`` (the ``hub`` extra) is imported here only, and only when a hub name or a push
needs it.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from staticsem.errors import InputError, MissingExtra, ModelFormatError
from staticsem.io.layout import FOLDER_FORMATS, folder_format, is_hub_name
from staticsem.version import __version__

logger = logging.getLogger(__name__)

HUB_EXTRA = "pip install 'staticsem[hub]'"
REVISION_HELP = "With a hub name: the branch, tag or commit to load [main]."  # the CLI's --revision
# weights of other frameworks a static model never needs (a transformer repo would be refused anyway)
_SKIPPED = ["*.onnx", "onnx/*", "openvino/*", "*.h5", "*.msgpack", "*.ot", "pytorch_model*.bin", "*.pt"]


def resolve(name: str | Path, revision: str | None = None) -> Path:
    """The local path of a model: ``name`` itself when it exists or is no hub name, else the hub
    repository ``name`` at ``revision`` (a branch, tag or commit; default ``main``) in the hub's cache.

    :raises ModelFormatError: when ``name`` is neither a local path nor a model the hub (or, offline, the
        cache) holds, naming both; or when a hub name needs the missing ``hub`` extra.
    :raises InputError: for a ``revision`` given with a local path.
    """
    path = Path(name).expanduser()
    if path.exists() or not is_hub_name(name):
        if revision is not None:
            raise InputError(f"{name}: a revision applies to hub names, and this is a local path")
        return path
    return _download(str(name), revision)


def _hub() -> Any:
    """The ``huggingface_hub`` module, or ``MissingExtra`` naming the extra."""
    try:
        import huggingface_hub
    except ImportError:
        raise MissingExtra(f"this needs huggingface_hub: {HUB_EXTRA}") from None
    return huggingface_hub


def _download(repo_id: str, revision: str | None) -> Path:
    """``snapshot_download`` of ``repo_id`` (offline: the cached snapshot), errors as one line each."""
    try:
        hub = _hub()
    except MissingExtra:
        raise ModelFormatError(
            f"{repo_id}: no such file or folder; to load it from the Hugging Face hub, {HUB_EXTRA}"
        ) from None
    from huggingface_hub import constants
    from huggingface_hub.utils import (  # where 0.24 and 1.x both keep them
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = "" if revision is None else f" at revision {revision!r}"
    try:
        folder = hub.snapshot_download(
            repo_id,
            revision=revision,
            ignore_patterns=_SKIPPED,
            library_name="staticsem",
            library_version=__version__,
        )
    except RevisionNotFoundError:
        raise ModelFormatError(
            f"{repo_id}: the hub has this repository but no revision {revision!r}"
        ) from None
    except RepositoryNotFoundError:
        raise ModelFormatError(
            f"{repo_id}: no such file or folder, and no model repository of that name on the Hugging Face "
            "hub that you may read (a private or gated one needs HF_TOKEN)"
        ) from None
    except LocalEntryNotFoundError as exc:
        if type(exc) is not LocalEntryNotFoundError:  # an incomplete snapshot and the like: the hub's words
            raise ModelFormatError(f"{repo_id}{at}: {_first_line(exc)}") from None
        why = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the hub cannot be reached"
        raise ModelFormatError(
            f"{repo_id}: no such file or folder, and not in the Hugging Face cache{at} "
            f"({constants.HF_HUB_CACHE}; {why})"
        ) from None
    except (OSError, ValueError) as exc:  # other HTTP errors, a full disk
        raise ModelFormatError(
            f"{repo_id}{at}: cannot download from the Hugging Face hub: {_first_line(exc)}"
        ) from None
    return Path(folder)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Saving(Protocol):
    """What ``push_model`` needs of a ``StaticModel`` (which it does not import)."""

    @property
    def dtype(self) -> str: ...

    def save(self, path: str | Path, **options: Any) -> Path: ...


def push_model(model: Saving, repo_id: str, **options: Any) -> str:
    """Upload ``model`` in staticsem's format, stored as its own dtype (``options``: ``push_folder``'s)."""
    check_repo_id(repo_id)
    with tempfile.TemporaryDirectory(prefix="staticsem-push-") as scratch:
        return push_folder(model.save(Path(scratch) / "model", dtype=model.dtype), repo_id, **options)


def push_folder(
    folder: Path, repo_id: str, *, private: bool = False, token: str | None = None, license: str | None = None
) -> str:
    """Upload a model folder in staticsem's, model2vec's or sentence-transformers' layout as it is (its own
    README.md kept when staticsem did not write it) to ``repo_id`` with a model card. The repository is
    created if needed (``private`` applies then). ``token`` defaults to the environment's.

    :returns: the repository's URL.
    :raises InputError: for a bad ``repo_id``, a folder in no such layout, or when the hub refuses (one line).
    """
    check_repo_id(repo_id)
    if not is_model_folder(folder):
        raise InputError(f"{folder}: push_folder takes a model folder ({', '.join(FOLDER_FORMATS)})")
    with tempfile.TemporaryDirectory(prefix="staticsem-push-") as scratch:
        stage = Path(scratch) / folder.resolve().name  # the name its eval reports know it by
        _stage(folder, stage)
        return _upload(stage, repo_id, private=private, token=token, license=license)


def check_repo_id(repo_id: str) -> None:
    """Raise ``InputError`` unless ``repo_id`` is a hub repository id (``owner/name``)."""
    if not is_hub_name(repo_id):
        raise InputError(f"{repo_id!r} is not a hub repository id (owner/name)")


def is_model_folder(path: Path) -> bool:
    """True for a folder in one of the layouts ``push_folder`` uploads as it is."""
    try:
        return path.is_dir() and bool(folder_format(path))
    except ModelFormatError:
        return False


def _stage(source: Path, stage: Path) -> None:
    """``source``'s files under ``stage`` (hard links where possible), without hub cache bookkeeping."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if relative.parts[0] == ".cache" or not path.is_file():
            continue
        target = stage / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path.resolve(), target)
        except OSError:  # another file system
            shutil.copyfile(path, target)


def _upload(stage: Path, repo_id: str, *, private: bool, token: str | None, license: str | None) -> str:
    """Write the card into ``stage``, create the repository and upload ``stage`` as one commit."""
    from staticsem.io import card

    hub = _hub()
    card.write(stage, repo_id=repo_id, license=license)
    api = hub.HfApi(token=token, library_name="staticsem", library_version=__version__)
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(
            folder_path=str(stage),
            repo_id=repo_id,
            repo_type="model",
            commit_message=f"Upload model with staticsem {__version__}",
        )
    except (OSError, ValueError) as exc:  # HTTP errors, offline mode, no connection, a refused token
        raise InputError(f"cannot push to {repo_id}: {_first_line(exc)}") from None
    return str(url)
