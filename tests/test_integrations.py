"""Framework integrations against the real packages: each framework's vectors are the model's (queries by
``encode_query``, documents by ``encode_document``), and
each round trip (a vector store, an index, a pipeline, a collection) finds the right document."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import staticsem
from conftest import MODE_TEXTS, PHRASE_TEXTS
from servers import running
from staticsem import StaticModel

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

DOCS = ["the cat sat on the mat", "the king and the queen", "Paris france", "a happy dog ran"]
QUERY = "queen king"  # nearest document: DOCS[1]


def nearest(model: StaticModel) -> str:
    scores = model.encode(DOCS) @ model.encode(QUERY)
    return DOCS[int(np.argmax(scores))]


# ---------------------------------------------------------------- every framework: encode's vectors
# "Paris" and "paris" are two rows of the test model: a text whose case changes on the way changes its vector
MIXED = ["Paris", "paris France", "The KING met the Queen", "a Happy house"]


def _langchain(model: StaticModel) -> dict[str, Callable[[list[str]], Any]]:
    from staticsem.integrations.langchain import StaticsemEmbeddings

    embed = StaticsemEmbeddings(model)
    return {
        "documents": embed.embed_documents,
        "query": lambda texts: [embed.embed_query(t) for t in texts],
        "async documents": lambda texts: asyncio.run(embed.aembed_documents(texts)),
        "async query": lambda texts: [asyncio.run(embed.aembed_query(t)) for t in texts],
    }


def _llamaindex(model: StaticModel) -> dict[str, Callable[[list[str]], Any]]:
    from staticsem.integrations.llamaindex import StaticsemEmbedding

    embed = StaticsemEmbedding(model)
    return {
        "documents": embed.get_text_embedding_batch,
        "document": lambda texts: [embed.get_text_embedding(t) for t in texts],
        "query": lambda texts: [embed.get_query_embedding(t) for t in texts],
        "async query": lambda texts: [asyncio.run(embed.aget_query_embedding(t)) for t in texts],
        "async document": lambda texts: [asyncio.run(embed.aget_text_embedding(t)) for t in texts],
        "async documents": lambda texts: asyncio.run(embed.aget_text_embedding_batch(texts)),
    }


def _haystack(model: StaticModel) -> dict[str, Callable[[list[str]], Any]]:
    from haystack import Document

    from staticsem.integrations.haystack import StaticsemDocumentEmbedder, StaticsemTextEmbedder

    documents, text = StaticsemDocumentEmbedder(model), StaticsemTextEmbedder(model)
    return {
        "documents": lambda texts: [
            d.embedding for d in documents.run([Document(content=t) for t in texts])["documents"]
        ],
        "query": lambda texts: [text.run(t)["embedding"] for t in texts],
    }


def _chroma(model: StaticModel) -> dict[str, Callable[[list[str]], Any]]:
    from staticsem.integrations.chroma import StaticsemEmbeddingFunction

    embed = StaticsemEmbeddingFunction(model)
    return {"documents": embed, "query": embed.embed_query}


@pytest.mark.parametrize("framework", [_langchain, _llamaindex, _haystack, _chroma], ids=lambda f: f.__name__)
def test_every_framework_embeds_mixed_case_texts_as_encode_does(
    framework: Callable[[StaticModel], dict[str, Callable[[list[str]], Any]]], tiny_model: StaticModel
) -> None:
    assert not np.allclose(tiny_model.encode("Paris"), tiny_model.encode("paris"))
    want = tiny_model.encode(MIXED)
    for name, embed in framework(tiny_model).items():
        np.testing.assert_array_equal(np.array(embed(MIXED), np.float32), want, err_msg=name)


@pytest.mark.parametrize("framework", [_langchain, _llamaindex, _haystack, _chroma], ids=lambda f: f.__name__)
def test_every_framework_encodes_queries_and_documents_in_their_modes(
    framework: Callable[[StaticModel], dict[str, Callable[[list[str]], Any]]], modes_model: StaticModel
) -> None:
    queries, documents = modes_model.encode_query(MODE_TEXTS), modes_model.encode_document(MODE_TEXTS)
    assert np.abs(queries - documents).max() > 0.05  # the two modes differ on these texts
    for name, embed in framework(modes_model).items():
        want = queries if "query" in name else documents
        np.testing.assert_array_equal(np.array(embed(MODE_TEXTS), np.float32), want, err_msg=name)


@pytest.mark.parametrize("framework", [_langchain, _llamaindex, _haystack, _chroma], ids=lambda f: f.__name__)
def test_every_framework_embeds_phrases_as_encode_does(
    framework: Callable[[StaticModel], dict[str, Callable[[list[str]], Any]]], phrase_model: StaticModel
) -> None:
    want = phrase_model.encode(PHRASE_TEXTS)
    assert not np.allclose(want[:3], phrase_model.without_phrases().encode(PHRASE_TEXTS[:3]), atol=0.01)
    for name, embed in framework(phrase_model).items():
        np.testing.assert_array_equal(np.array(embed(PHRASE_TEXTS), np.float32), want, err_msg=name)


# ---------------------------------------------------------------- LangChain
def test_langchain_embeddings_are_the_model_vectors(saved_model: Path) -> None:
    from staticsem.integrations.langchain import StaticsemEmbeddings

    model = staticsem.load(saved_model)
    embeddings = StaticsemEmbeddings(saved_model)
    np.testing.assert_array_equal(np.array(embeddings.embed_documents(DOCS), np.float32), model.encode(DOCS))
    np.testing.assert_array_equal(np.array(embeddings.embed_query(QUERY), np.float32), model.encode(QUERY))
    docs = asyncio.run(embeddings.aembed_documents(DOCS))
    query = asyncio.run(embeddings.aembed_query(QUERY))
    np.testing.assert_array_equal(np.array(docs, np.float32), model.encode(DOCS))
    np.testing.assert_array_equal(np.array(query, np.float32), model.encode(QUERY))


def test_langchain_in_memory_vector_store(tiny_model: StaticModel) -> None:
    from langchain_core.vectorstores import InMemoryVectorStore

    from staticsem.integrations.langchain import StaticsemEmbeddings

    store = InMemoryVectorStore.from_texts(DOCS, StaticsemEmbeddings(tiny_model))
    stored = {record["text"]: record["vector"] for record in store.store.values()}
    np.testing.assert_allclose(np.array([stored[d] for d in DOCS]), tiny_model.encode(DOCS), atol=1e-6)
    found = store.similarity_search(QUERY, k=1)
    assert found[0].page_content == nearest(tiny_model) == DOCS[1]
    found = asyncio.run(store.asimilarity_search(QUERY, k=1))
    assert found[0].page_content == DOCS[1]


def test_langchain_openai_embeddings_against_a_live_server(saved_model: Path) -> None:
    """docs/integrations.md's option for any framework: LangChain's OpenAIEmbeddings on `staticsem serve`."""
    from langchain_openai import OpenAIEmbeddings

    served = staticsem.load(saved_model)
    with running([str(saved_model), "--name", "tiny"]) as server:
        embeddings = OpenAIEmbeddings(
            model="tiny", base_url=f"{server.url}/v1", api_key="unused", check_embedding_ctx_length=False
        )
        docs, query = embeddings.embed_documents(DOCS), embeddings.embed_query(QUERY)
    np.testing.assert_allclose(np.array(docs), served.encode(DOCS), atol=1e-6)
    np.testing.assert_allclose(np.array(query), served.encode(QUERY), atol=1e-6)


# ---------------------------------------------------------------- LlamaIndex
def test_llamaindex_vector_store_index(tiny_model: StaticModel) -> None:
    from llama_index.core import Document, VectorStoreIndex

    from staticsem.integrations.llamaindex import StaticsemEmbedding

    embed = StaticsemEmbedding(tiny_model)
    np.testing.assert_array_equal(np.array(embed.get_text_embedding_batch(DOCS)), tiny_model.encode(DOCS))
    np.testing.assert_array_equal(np.array(embed.get_query_embedding(QUERY)), tiny_model.encode(QUERY))
    np.testing.assert_array_equal(
        np.array(asyncio.run(embed.aget_query_embedding(QUERY))), tiny_model.encode(QUERY)
    )
    index = VectorStoreIndex.from_documents([Document(text=d) for d in DOCS], embed_model=embed)
    stored = index.vector_store.data.embedding_dict  # type: ignore[attr-defined]
    texts = {node_id: index.docstore.get_node(node_id).get_content() for node_id in stored}
    for node_id, vector in stored.items():
        np.testing.assert_allclose(vector, tiny_model.encode(texts[node_id]), atol=1e-6)
    hits = index.as_retriever(similarity_top_k=1).retrieve(QUERY)
    assert hits[0].node.get_content() == DOCS[1]


def test_llamaindex_from_a_path(saved_model: Path) -> None:
    from staticsem.integrations.llamaindex import StaticsemEmbedding

    embed = StaticsemEmbedding(saved_model)
    assert embed.model_name == str(saved_model)
    np.testing.assert_array_equal(
        np.array(embed.get_text_embedding(DOCS[0])), staticsem.load(saved_model).encode(DOCS[0])
    )


# ---------------------------------------------------------------- Haystack
def test_haystack_pipelines(saved_model: Path) -> None:
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
    from haystack.components.writers import DocumentWriter
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from staticsem.integrations.haystack import StaticsemDocumentEmbedder, StaticsemTextEmbedder

    model = staticsem.load(saved_model)
    store = InMemoryDocumentStore()
    indexing = Pipeline()
    indexing.add_component("embedder", StaticsemDocumentEmbedder(str(saved_model)))
    indexing.add_component("writer", DocumentWriter(store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": [Document(content=d) for d in DOCS]}})
    stored = {doc.content: doc.embedding for doc in store.filter_documents()}
    np.testing.assert_allclose(np.array([stored[d] for d in DOCS]), model.encode(DOCS), atol=1e-6)

    query = Pipeline()
    query.add_component("embedder", StaticsemTextEmbedder(str(saved_model)))
    query.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=1))
    query.connect("embedder.embedding", "retriever.query_embedding")
    # the components serialise with their model path (Haystack asks to allow the module explicitly)
    again = Pipeline.from_dict(query.to_dict(), allowed_modules=["staticsem.integrations.haystack"])
    for pipeline in (query, again):
        result = pipeline.run({"embedder": {"text": QUERY}}, include_outputs_from={"embedder"})
        np.testing.assert_array_equal(np.array(result["embedder"]["embedding"]), model.encode(QUERY))
        assert result["retriever"]["documents"][0].content == DOCS[1]


def test_haystack_components_take_a_loaded_model(tiny_model: StaticModel) -> None:
    from haystack import Document

    from staticsem.integrations.haystack import StaticsemDocumentEmbedder, StaticsemTextEmbedder

    docs = StaticsemDocumentEmbedder(tiny_model).run([Document(content=d) for d in DOCS])["documents"]
    np.testing.assert_array_equal(np.array([d.embedding for d in docs]), tiny_model.encode(DOCS))
    text = StaticsemTextEmbedder(tiny_model).run(QUERY)["embedding"]
    np.testing.assert_array_equal(np.array(text), tiny_model.encode(QUERY))


# ---------------------------------------------------------------- Chroma
def test_chroma_collection(saved_model: Path, tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    from staticsem.integrations.chroma import StaticsemEmbeddingFunction

    model = staticsem.load(saved_model)
    function = StaticsemEmbeddingFunction(saved_model)
    np.testing.assert_array_equal(np.array(function(DOCS)), model.encode(DOCS))
    client = chromadb.PersistentClient(
        str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("docs", embedding_function=function)  # type: ignore[arg-type]
    collection.add(ids=[str(i) for i in range(len(DOCS))], documents=DOCS)
    got = collection.get(ids=[str(i) for i in range(len(DOCS))], include=["embeddings"])
    np.testing.assert_allclose(np.array(got["embeddings"]), model.encode(DOCS), atol=1e-6)
    found = collection.query(query_texts=[QUERY], n_results=1)
    assert found["documents"] == [[DOCS[1]]]
    # reopened without passing the function: Chroma rebuilds it from the collection's config
    reopened = client.get_collection("docs")
    assert reopened.query(query_texts=[QUERY], n_results=1)["documents"] == [[DOCS[1]]]


# ---------------------------------------------------------------- lazy imports
def test_importing_staticsem_imports_no_framework() -> None:
    code = (
        "import sys, staticsem, staticsem.integrations; "
        "loaded = [m for m in ('langchain_core', 'llama_index', 'haystack', 'chromadb', 'torch') "
        "if m in sys.modules]; assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("langchain", "langchain"),
        ("llamaindex", "llamaindex"),
        ("haystack", "haystack"),
        ("chroma", "chroma"),
    ],
)
def test_a_missing_framework_names_its_extra(module: str, extra: str) -> None:
    blocked = {"langchain": "langchain_core", "llamaindex": "llama_index", "haystack": "haystack"}.get(
        module, "chromadb"
    )
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        f"try:\n    import staticsem.integrations.{module}\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert f"pip install 'staticsem[{extra}]'" in done.stdout, done.stdout + done.stderr
