"""Schemathesis against the /v2 fleet API's OpenAPI document: no generated request breaks the server, every answer
matches what the document says.

Bounded: a few examples per operation, positive generation, in-process (ASGI). The store behind the app holds seed
004's example, and each case's path parameters are snapped to its names except the last one, so generated bodies
reach the catalog and the placement service instead of stopping at a 404 for a random parent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from devplace.placement._catalog import Catalog
from devplace.server._app import create_app
from devplace.store import MemoryStore
from tests.placement.samples import build_seed

MAX_EXAMPLES = 6

_store = MemoryStore()
asyncio.run(build_seed(Catalog(_store)))

SEED_NAMES = {
    "project": "my-proj1",
    "compositeApp": "my-capp1",
    "version": "v1.0",
    "deploymentIntentGroup": "my-dig1",
    "genericPlacementIntent": "gpi",
    "hpaIntent": "fwall-hpa-intent",
    "consumer": "core-fwall",
    "clusterProvider": "edge",
    "cluster": "cluster-1",
}

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_store))
schema.config.generation.update(max_examples=MAX_EXAMPLES, modes=[schemathesis.GenerationMode.POSITIVE])
schema = schema.include(path_regex="^/v2/")


def snap(case: schemathesis.Case) -> None:
    """Every path parameter but the innermost names the seed's object; the innermost stays generated."""
    params: dict[str, Any] = case.path_parameters or {}
    if not params:
        return
    innermost = max(params, key=lambda p: case.path.index("{" + p + "}"))
    for name in params:
        if name != innermost and name in SEED_NAMES:
            params[name] = SEED_NAMES[name]
    if case.path.endswith(("/plan", "/instantiate", "/status", "/approve", "/terminate")) or innermost == "version":
        for name in params:
            if name in SEED_NAMES:
                params[name] = SEED_NAMES[name]


@schema.parametrize()
def test_no_generated_request_breaks_the_fleet_api(case: schemathesis.Case) -> None:
    snap(case)
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])
