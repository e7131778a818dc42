"""Connecting to a Ray cluster, with one-line errors when Ray is missing or the cluster cannot be reached."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from staticsem.errors import InputError

logger = logging.getLogger(__name__)
ADDRESS_HELP = (
    "auto (the running cluster, else a new one on this machine), local (a new one on this machine), "
    "HOST:PORT of a cluster's head node, or ray://HOST:PORT (Ray Client)"
)


def require_ray() -> ModuleType:
    """The ``ray`` module, or ``InputError`` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise InputError("scale-out needs Ray: pip install 'staticsem[ray]'") from None
    return ray


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast (instead of Ray's long retries) when nothing listens at ``HOST:PORT``."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"Ray address must be {ADDRESS_HELP}; got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def connect(address: str = "auto", **options: Any) -> None:
    """Join (or start) the Ray cluster named by ``address`` unless this process already has one.

    :param address: see ``ADDRESS_HELP``; ``options`` go to ``ray.init`` (e.g. ``num_cpus`` for a local one).
    :raises InputError: when Ray is missing or the cluster cannot be reached.
    """
    ray = require_ray()
    if address not in ("auto", "local"):
        _reachable(address)
        options.pop("num_cpus", None)
    if ray.is_initialized():
        return
    try:
        ray.init(
            address=None if address == "auto" else address,
            log_to_driver=False,
            configure_logging=False,
            **({"include_dashboard": False} if address in ("auto", "local") else {}),
            **options,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise InputError(f"cannot reach the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    logger.info("Ray cluster: %s", ray.cluster_resources())


@dataclass(frozen=True)
class Placement:
    """How many teacher replicas to run and what each asks of the cluster."""

    replicas: int
    num_cpus: float
    num_gpus: float
    threads: int  # torch threads per replica

    @classmethod
    def plan(cls, workers: int | None = None) -> Placement:
        """One replica per GPU when the cluster has GPUs, else one per CPU (``workers`` overrides)."""
        ray = require_ray()
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), max(int(resources.get("CPU", 1)), 1)
        if workers is not None and workers < 1:
            raise InputError(f"--ray-workers must be positive, got {workers}")
        if gpus:
            replicas = workers or gpus
            return cls(
                replicas, min(1.0, cpus / replicas), min(1.0, gpus / replicas), max(1, cpus // replicas)
            )
        replicas = workers or cpus
        return cls(replicas, cpus / replicas, 0.0, max(1, cpus // replicas))
