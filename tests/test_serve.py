"""The HTTP server in-process (FastAPI's TestClient): every endpoint, the limits, the API key."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from conftest import PHRASE_TEXTS
from staticsem import StaticModel
from staticsem.serve import Limits, ServeSettings, create_app
from staticsem.serve.app import app_from_settings

SMALL = Limits(max_inputs=4, max_chars=40, max_body_bytes=2_000, max_k=5, max_matrix_cells=6)


@pytest.fixture()
def client(tiny_model: StaticModel) -> Iterator[TestClient]:
    with TestClient(create_app(tiny_model, name="tiny")) as test_client:
        yield test_client


@pytest.fixture()
def small(tiny_model: StaticModel) -> Iterator[TestClient]:
    with TestClient(create_app(tiny_model, limits=SMALL)) as test_client:
        yield test_client


def embed(client: TestClient, **body: object) -> np.ndarray:
    response = client.post("/v1/embeddings", json=body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert [row["index"] for row in data] == list(range(len(data)))
    rows = [row["embedding"] for row in data]
    if body.get("encoding_format") == "base64":
        return np.stack([np.frombuffer(base64.b64decode(row), dtype="<f4") for row in rows])
    return np.array(rows, dtype=np.float32)


def error_of(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and "Traceback" not in error["message"]
    return error  # type: ignore[no-any-return]


# ---------------------------------------------------------------- embeddings
TEXTS = ["the cat sat on the mat", "a happy dog ran", "Paris france", "zzzz qqq"]


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_embeddings_match_the_model(client: TestClient, tiny_model: StaticModel, encoding: str) -> None:
    got = embed(client, input=TEXTS, model="anything", encoding_format=encoding)
    np.testing.assert_allclose(got, tiny_model.encode(TEXTS), atol=1e-6)


def test_embeddings_count_the_models_phrases(phrase_model: StaticModel) -> None:
    with TestClient(create_app(phrase_model, name="phrases")) as client:
        got = embed(client, input=PHRASE_TEXTS, model="phrases")
    np.testing.assert_allclose(got, phrase_model.encode(PHRASE_TEXTS), atol=1e-6)
    assert not np.allclose(got[:3], phrase_model.without_phrases().encode(PHRASE_TEXTS[:3]), atol=0.01)


def test_embeddings_answer_in_openai_shape(client: TestClient) -> None:
    body = client.post("/v1/embeddings", json={"input": "the cat sat"}).json()
    assert body["object"] == "list" and body["model"] == "tiny"
    assert len(body["data"]) == 1 and body["data"][0]["object"] == "embedding"
    assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}


def test_dimensions_keep_a_renormalised_prefix(client: TestClient, tiny_model: StaticModel) -> None:
    got = embed(client, input=TEXTS[:2], dimensions=5)
    full = tiny_model.encode(TEXTS[:2])[:, :5]
    np.testing.assert_allclose(got, full / np.linalg.norm(full, axis=1, keepdims=True), atol=1e-6)
    assert (
        "dimensions"
        in error_of(client.post("/v1/embeddings", json={"input": "a", "dimensions": 17}), 422)["message"]
    )


@pytest.mark.parametrize(
    "body",
    [
        {"input": []},
        {"input": [1, 2]},
        {"input": [[1, 2]]},
        {},
        {"input": "a", "encoding_format": "int8"},
        {"input": "a", "dimensions": True},  # a boolean is not a count (pydantic would read true as 1)
        {"input": "a", "dimensions": "4"},
    ],
)
def test_bad_embedding_requests_are_422(client: TestClient, body: dict) -> None:
    error_of(client.post("/v1/embeddings", json=body), 422)


@pytest.mark.parametrize("path", ["/search", "/analogy"])
def test_a_boolean_k_is_422(client: TestClient, path: str) -> None:
    body = {"query": "cat", "a": "man", "b": "king", "c": "woman", "k": True}
    assert client.post(path, json=body).status_code == 422


def test_counts_are_json_integers_even_spelled_with_a_fraction(client: TestClient) -> None:
    """JSON Schema's integer holds 3.0 (schema-valid clients send it); 3.5 is no count."""
    analogy = {"a": "man", "b": "king", "c": "woman"}
    assert client.post("/analogy", json={**analogy, "k": 3.0}).status_code == 200
    assert client.post("/analogy", json={**analogy, "k": 3.5}).status_code == 422
    assert client.post("/v1/embeddings", json={"input": "cat", "dimensions": 4.0}).status_code == 200
    assert client.post("/v1/embeddings", json={"input": "cat", "dimensions": 4.5}).status_code == 422


# ---------------------------------------------------------------- similarity and words
def test_similarity_pairs_and_matrix(client: TestClient, tiny_model: StaticModel) -> None:
    vectors = tiny_model.encode(TEXTS)
    pairs = client.post("/similarity", json={"pairs": [TEXTS[:2], TEXTS[2:]]}).json()
    np.testing.assert_allclose(pairs["scores"], [vectors[0] @ vectors[1], vectors[2] @ vectors[3]], atol=1e-6)
    square = client.post("/similarity", json={"texts": TEXTS[:3]}).json()["matrix"]
    np.testing.assert_allclose(square, vectors[:3] @ vectors[:3].T, atol=1e-6)
    wide = client.post("/similarity", json={"texts": TEXTS[:1], "others": TEXTS}).json()["matrix"]
    np.testing.assert_allclose(wide, vectors[:1] @ vectors.T, atol=1e-6)


@pytest.mark.parametrize(
    "body", [{}, {"pairs": [["a", "b"]], "texts": ["a"]}, {"pairs": [["a", "b"]], "others": ["c"]}]
)
def test_similarity_needs_pairs_or_texts(client: TestClient, body: dict) -> None:
    error_of(client.post("/similarity", json=body), 422)


def test_neighbors_and_analogy_match_the_model(client: TestClient, tiny_model: StaticModel) -> None:
    body = client.get("/neighbors", params={"word": "king", "k": 3}).json()
    assert [(n["word"], pytest.approx(n["score"])) for n in body["neighbors"]] == tiny_model.most_similar(
        "king", 3
    )
    body = client.post("/analogy", json={"a": "man", "b": "king", "c": "woman", "k": 2}).json()
    expected = tiny_model.analogy("man", "king", "woman", 2)
    assert [(a["word"], pytest.approx(a["score"])) for a in body["answers"]] == expected


def test_unknown_words_are_404(client: TestClient) -> None:
    assert "zzzz" in error_of(client.get("/neighbors", params={"word": "zzzz"}), 404)["message"]
    error_of(client.post("/analogy", json={"a": "man", "b": "qqq", "c": "woman"}), 404)
    error_of(client.get("/neighbors", params={"word": ""}), 422)


def test_health_info_and_the_playground(client: TestClient, tiny_model: StaticModel) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/info").json()
    assert (info["model"], info["words"], info["dim"]) == ("tiny", len(tiny_model), tiny_model.dim)
    assert info["limits"]["max_inputs"] == Limits().max_inputs and info["index"] is None
    page = client.get("/")
    assert page.status_code == 200 and 'id="heatmap"' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # works offline: nothing fetched


def test_api_docs_are_served_without_a_cdn(client: TestClient) -> None:
    docs = client.get("/docs").text
    assert "swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()
    schema = client.get("/openapi.json").json()
    assert {"/v1/embeddings", "/similarity", "/neighbors", "/analogy", "/search", "/documents"} <= schema[
        "paths"
    ].keys()


def test_the_schema_carries_the_configured_limits(small: TestClient, tiny_model: StaticModel) -> None:
    schema = small.get("/openapi.json").json()
    text, texts = schema["components"]["schemas"]["EmbeddingRequest"]["properties"]["input"]["anyOf"]
    assert (text["maxLength"], texts["maxItems"], texts["items"]["maxLength"]) == (40, 4, 40)
    dims = schema["components"]["schemas"]["EmbeddingRequest"]["properties"]["dimensions"]["anyOf"][0]
    assert dims["maximum"] == tiny_model.dim
    k = next(p for p in schema["paths"]["/neighbors"]["get"]["parameters"] if p["name"] == "k")
    assert k["schema"]["maximum"] == 5


# ---------------------------------------------------------------- limits
@pytest.mark.parametrize(
    ("method", "path", "body", "limit"),
    [
        ("post", "/v1/embeddings", {"input": ["a"] * 5}, "max_inputs"),
        ("post", "/v1/embeddings", {"input": ["a" * 41]}, "max_chars"),
        ("post", "/similarity", {"pairs": [["a", "b"]] * 5}, "max_inputs"),
        ("post", "/similarity", {"texts": ["a", "b", "c"]}, "max_matrix_cells"),
        ("post", "/analogy", {"a": "man", "b": "king", "c": "woman", "k": 6}, "max_k"),
        ("get", "/neighbors?word=king&k=6", None, "max_k"),
        ("get", f"/neighbors?word={'a' * 41}", None, "max_chars"),
        ("post", "/search", {"query": "a" * 41}, "max_chars"),
    ],
)
def test_each_limit_is_named_in_a_422(
    small: TestClient, method: str, path: str, body: dict | None, limit: str
) -> None:
    response = small.request(method, path, json=body)
    error = error_of(response, 422)
    assert error["limit"] == limit and limit in error["message"]


def test_within_the_limits_is_fine(small: TestClient) -> None:
    assert small.post("/v1/embeddings", json={"input": ["a" * 40] * 4}).status_code == 200
    assert small.post("/similarity", json={"texts": ["a", "b"], "others": ["c", "d", "e"]}).status_code == 200


def test_body_limit_is_413_with_or_without_a_length(small: TestClient) -> None:
    big = b'{"input": "' + b"a" * 3_000 + b'"}'
    error = error_of(
        small.post("/v1/embeddings", content=big, headers={"content-type": "application/json"}), 413
    )
    assert error["limit"] == "max_body_bytes"

    def chunks() -> Iterator[bytes]:  # streamed: no Content-Length to trust
        yield big[:1_000]
        yield big[1_000:]

    response = small.post("/v1/embeddings", content=chunks(), headers={"content-type": "application/json"})
    assert error_of(response, 413)["limit"] == "max_body_bytes"


def test_bad_limits_are_refused() -> None:
    from staticsem.errors import InputError

    with pytest.raises(InputError, match="max_inputs"):
        Limits(max_inputs=0)


# ---------------------------------------------------------------- hostile input
def test_hostile_bodies(client: TestClient) -> None:
    json_type = {"content-type": "application/json"}
    assert (
        "UTF-8"
        in error_of(client.post("/v1/embeddings", content=b'{"input": "\xff\xfe"}', headers=json_type), 400)[
            "message"
        ]
    )
    assert (
        "JSON"
        in error_of(client.post("/v1/embeddings", content=b'{"input": ', headers=json_type), 422)["message"]
    )
    ten_mb = b'{"input": "' + b"word " * (2 * 2**20) + b'"}'
    assert (
        error_of(client.post("/v1/embeddings", content=ten_mb, headers=json_type), 413)["limit"]
        == "max_body_bytes"
    )
    many = client.post("/v1/embeddings", json={"input": ["cat"] * 100_000})
    assert error_of(many, 422)["limit"] == "max_inputs"


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        None,
    ],
)
def test_wrong_content_types_are_415(client: TestClient, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.post("/v1/embeddings", content=b'{"input": "cat"}', headers=headers)
    assert "application/json" in error_of(response, 415)["message"]


def test_json_with_charset_is_accepted(client: TestClient) -> None:
    headers = {"content-type": "application/json; charset=utf-8"}
    assert client.post("/v1/embeddings", content=b'{"input": "cat"}', headers=headers).status_code == 200


@pytest.mark.parametrize(
    "text",
    [
        "the\x00cat",
        "\x01\x02\x07\x1b[31m",
        "\u202eتحت الشمس\u202c the cat",
        "the 🐈 sat 👍🏽 on the mat",
        "",
        " " * 40,
    ],
)
def test_odd_text_encodes_like_the_library(client: TestClient, tiny_model: StaticModel, text: str) -> None:
    got = embed(client, input=[text, "cat"])
    np.testing.assert_allclose(got, tiny_model.encode([text, "cat"]), atol=1e-6)


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/embeddings", b'{"input": ["cat", "\\ud800"]}'), ("/search", b'{"query": "a\\udfff"}')],
)
def test_lone_surrogates_are_refused(client: TestClient, path: str, body: bytes) -> None:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert "surrogate" in error_of(response, 422)["message"]


def test_failures_answer_500_without_a_trace(tiny_model: StaticModel) -> None:
    class Broken(StaticModel):
        def encode(self, texts, **options):  # type: ignore[no-untyped-def]
            raise RuntimeError("secret detail at /srv/internal/path")

    broken = Broken(tiny_model.vocab, tiny_model.vectors)
    with TestClient(create_app(broken), raise_server_exceptions=False) as test_client:
        response = test_client.post("/v1/embeddings", json={"input": "cat"})
    error = error_of(response, 500)
    assert (
        "secret" not in response.text
        and "Traceback" not in response.text
        and error["type"] == "internal_error"
    )


def test_encoding_runs_off_the_event_loop(tiny_model: StaticModel) -> None:
    seen: list[bool] = []

    class Watched(StaticModel):
        def encode(self, texts, **options):  # type: ignore[no-untyped-def]
            try:
                asyncio.get_running_loop()
                seen.append(True)
            except RuntimeError:
                seen.append(False)
            return super().encode(texts, **options)

    watched = Watched(tiny_model.vocab, tiny_model.vectors)
    with TestClient(create_app(watched)) as test_client:
        test_client.post("/v1/embeddings", json={"input": "cat"})
        test_client.post("/similarity", json={"texts": ["cat"]})
    assert seen == [False, False]


# ---------------------------------------------------------------- write access
def test_writes_are_refused_without_a_configured_key(client: TestClient) -> None:
    response = client.post(
        "/documents", json={"documents": [{"text": "x"}]}, headers={"Authorization": "Bearer x"}
    )
    assert "--api-key-env" in error_of(response, 403)["message"]
    error_of(client.delete("/documents/1"), 403)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic c2VjcmV0"}]
)
def test_writes_need_the_right_key(tiny_model: StaticModel, headers: dict[str, str]) -> None:
    with TestClient(create_app(tiny_model, api_key="secret")) as test_client:
        error_of(test_client.post("/documents", json={"documents": [{"text": "x"}]}, headers=headers), 401)
        error_of(test_client.delete("/documents/1", headers=headers), 401)
        right = {"Authorization": "Bearer secret"}
        # the right key gets past the check (to "no index is served")
        assert "--index" in error_of(test_client.delete("/documents/1", headers=right), 404)["message"]


def test_app_from_settings_reads_the_key_from_the_environment(
    saved_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from staticsem.errors import InputError

    settings = ServeSettings(saved_model, api_key_env="STATICSEM_TEST_KEY")
    monkeypatch.delenv("STATICSEM_TEST_KEY", raising=False)
    with pytest.raises(InputError, match="STATICSEM_TEST_KEY"):
        app_from_settings(settings)
    monkeypatch.setenv("STATICSEM_TEST_KEY", "k3y")
    assert app_from_settings(settings).state.service.api_key == "k3y"
    assert ServeSettings.from_json(settings.to_json()) == settings
    assert "k3y" not in settings.to_json()
