"""Fuzz the server from its own OpenAPI schema with schemathesis: no 5xx, answers that match the schema."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from staticsem import StaticModel
from staticsem.search import Index
from staticsem.serve import Limits, create_app

KEY = "fuzz-key"


WORDS = ["the", "cat", "sat", "on", "mat", "dog", "king", "queen", "man", "woman", "paris", "france"]
LIMITS = Limits(max_inputs=64, max_chars=2_000, max_body_bytes=200_000, max_k=50, max_matrix_cells=1_000)
# Built at import: schemathesis reads the schema when the tests are collected.
MODEL = StaticModel(WORDS, np.random.default_rng(3).normal(size=(len(WORDS), 8)).astype(np.float32))
DOCS = [{"text": f"the {w} sat on the mat", "id": f"d{i}", "kind": w} for i, w in enumerate(WORDS)]
_FOLDER = tempfile.TemporaryDirectory(prefix="staticsem-fuzz-")  # removed when the session ends


APP = create_app(
    MODEL, limits=LIMITS, api_key=KEY, index=Index.build(MODEL, DOCS, Path(_FOLDER.name) / "index")
)
# The statuses this server answers invalid data with (app.py's COMMON/WRITE, the guard's 401/403/405);
# an oversized body is refused with 413 before its headers or fields are checked. No 5xx here: an
# invalid request that breaks the server is a failure, not a rejection
REJECT = ["400", "401", "403", "404", "405", "409", "413", "415", "422"]
CONFIG = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REJECT}}})
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case) -> None:  # type: ignore[no-untyped-def]
    case.call_and_validate(headers={"Authorization": f"Bearer {KEY}"})
