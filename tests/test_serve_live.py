"""``staticsem serve`` as a real process on loopback: the openai client, workers, shutdown, CLI errors."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import openai
import pytest

import staticsem
from servers import CLI, running

TEXTS = ["the cat sat on the mat", "Paris france", "a happy dog"]


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_the_openai_client_works_unchanged(saved_model: Path, encoding: str) -> None:
    served = staticsem.load(saved_model)  # float16 on disk
    with running([str(saved_model), "--name", "tiny"]) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)
        result = client.embeddings.create(model="tiny", input=TEXTS, encoding_format=encoding)  # type: ignore[arg-type]
        single = client.embeddings.create(model="tiny", input="the cat")
    rows = [row.embedding for row in result.data]  # asked for base64, the client hands the strings back
    got = np.stack(
        [np.frombuffer(base64.b64decode(r), "<f4") if isinstance(r, str) else np.array(r) for r in rows]
    )
    np.testing.assert_allclose(got, served.encode(TEXTS), atol=1e-6)
    np.testing.assert_allclose(single.data[0].embedding, served.encode("the cat"), atol=1e-6)
    assert result.model == "tiny" and result.usage.prompt_tokens == 11


def test_openai_client_sees_limit_errors(saved_model: Path) -> None:
    with running([str(saved_model), "--max-inputs", "2"]) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.UnprocessableEntityError, match="max_inputs"):
            client.embeddings.create(model="tiny", input=TEXTS)


def test_workers_serve_the_same_answers(saved_model: Path) -> None:
    import httpx

    expected = staticsem.load(saved_model).encode(TEXTS)
    with running([str(saved_model), "--workers", "2"]) as server:
        for _ in range(4):  # spread over both processes
            body = httpx.post(f"{server.url}/v1/embeddings", json={"input": TEXTS}).json()
            got = np.array([row["embedding"] for row in body["data"]], dtype=np.float32)
            np.testing.assert_allclose(got, expected, atol=1e-6)


def test_shutdown_lets_an_in_flight_request_finish(saved_model: Path) -> None:
    """SIGTERM while a request's body is half sent: it still gets its answer, then the server exits."""
    body = json.dumps({"input": TEXTS}).encode()
    with running([str(saved_model)]) as server:
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            head = f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            conn.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
            time.sleep(0.3)
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert server.process.poll() is None  # still waiting for the request
            conn.sendall(body[10:])
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b'"embedding"' in answer
        code, _ = server.stop()
    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_cli_errors_are_one_line(saved_model: Path, tmp_path: Path) -> None:
    missing = run_cli(str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "nope" in missing.stderr
    no_key = run_cli(
        str(saved_model), "--api-key-env", "STATICSEM_UNSET_KEY", env={"STATICSEM_UNSET_KEY": ""}
    )
    assert no_key.returncode == 2 and "STATICSEM_UNSET_KEY" in no_key.stderr
    assert "Traceback" not in missing.stderr + no_key.stderr


def test_writes_through_the_cli_key(saved_model: Path) -> None:
    import httpx

    env = {"STATICSEM_TEST_KEY": "s3cret"}
    with running([str(saved_model), "--api-key-env", "STATICSEM_TEST_KEY"], env=env) as server:
        url = f"{server.url}/documents/1"
        assert httpx.delete(url).status_code == 401
        assert httpx.delete(url, headers={"Authorization": "Bearer s3cret"}).status_code == 404  # no index
        assert httpx.get(f"{server.url}/info").json()["writes"] is False  # no index to write to
