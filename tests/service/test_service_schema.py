"""A bounded schemathesis run against the OpenAPI schema of the service: every operation gets
generated requests (valid and invalid); no reply may be a 500, and every reply must match the
schema the service documents (its status, content type and body). The counts of the run are
written to the test artifacts folder."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from noetlc.service.app import create_app
from noetlc.service.serving import artifacts_dir
from noetlc.service.testing import TOKEN, settings_for

pytestmark = pytest.mark.slow

COUNTS: Counter[str] = Counter()
HELLO = (Path(__file__).resolve().parents[2] / "examples" / "hello.yaml").read_text()


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    folder = tmp_path_factory.mktemp("schema")
    app = create_app(settings_for(f"sqlite:///{folder / 'noetl.db'}"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    yield schema
    app.state.service.close()
    (artifacts_dir() / "schemathesis.json").write_text(json.dumps(dict(COUNTS), indent=2))


CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


def test_no_server_errors_and_replies_match_the_schema(api_schema: object) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]  # type: ignore[attr-defined]
    assert len(operations) >= 25
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: schemathesis.Case) -> None:
            if case.path.endswith("/events") and case.method == "GET":
                case.query = {**(case.query or {}), "stream": False}  # a live stream never ends
            response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
            COUNTS["requests"] += 1
            COUNTS[f"{response.status_code // 100}xx"] += 1
            case.validate_response(response, checks=CHECKS)

        run()
        COUNTS["operations"] += 1
