"""Start ``staticsem serve`` as a real process on a free loopback port, and stop it (tests only)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

CLI = "from staticsem.cli import main; main()"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str

    def stop(self, timeout: float = 20) -> tuple[int, str]:
        """SIGTERM, wait, and return the exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, stderr = self.process.communicate()
        return self.process.returncode, stderr


def start(args: list[str], env: dict[str, str] | None = None, wait: float = 60) -> Server:
    """Run ``staticsem serve ARGS --port FREE`` and wait until ``/health`` answers; a port another test
    process took between ``free_port`` and the server's bind (tests run side by side) means another port."""
    for _ in range(4):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-c", CLI, "serve", *args, "--port", str(port)],
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        server = Server(process, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if process.poll() is not None:
                stderr = process.stderr.read()  # type: ignore[union-attr]
                if "address already in use" in stderr:
                    break
                raise RuntimeError(f"server exited with {process.returncode}: {stderr}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                    return server
            time.sleep(0.1)
        else:
            server.stop()
            raise RuntimeError(f"server did not answer /health within {wait} s")
    raise RuntimeError("no free port the server could bind in 4 tries")


@contextlib.contextmanager
def running(args: list[str], env: dict[str, str] | None = None) -> Iterator[Server]:
    server = start(args, env)
    try:
        yield server
    finally:
        server.stop()
