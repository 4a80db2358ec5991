import json

from app.main import create_app
from tests.support import ROOT

SPEC = ROOT / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    committed = json.loads(SPEC.read_text())
    generated = json.loads(json.dumps(create_app().openapi()))
    assert committed == generated, "openapi.json is stale: regenerate it with `engram openapi`"


def test_every_operation_documents_the_error_shape() -> None:
    spec = create_app().openapi()
    assert set(spec["components"]["schemas"]["ErrorBody"]["properties"]) == {"error", "detail"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/v1/agents/{agent_id}"):
                assert {"404", "422"} <= set(operation["responses"]), (method, path)
