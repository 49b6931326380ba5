"""Fuzz the live API from its own served OpenAPI schema (schemathesis): no 500s, no violations.

The schema is fetched over HTTP from pytest-django's live_server (a real server on 127.0.0.1
over the test database) and every operation is exercised with hypothesis-generated requests
carrying an admin-scoped key whose rate is high enough not to be throttled. schemathesis'
pytest loader (`from_fixture`) does not work with pytest 9 (it writes `node._nodeid`), so the
operations are driven here with `operation.as_strategy()`, collecting every failure.
Examples per operation are bounded so the run stays well under two minutes.

Every default check runs (no 5xx, documented status codes, content types, response schemas and
headers, schema-invalid data rejected, auth enforced) except `positive_data_acceptance`:
a schema-valid body can still be refused by a business rule JSON Schema cannot express (the
template must exist, names are unique, the context must hold the template's variables).
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from clients.services import api_client_create
from templates.services import template_create

MAX_EXAMPLES = 40


@pytest.fixture
def api_key(transactional_db) -> str:
    client, key = api_client_create(name="fuzzer", scopes=["admin"], rate_limit="100000/min")
    template_create(client=client, name="otp", subject="Code {{ code }}", html_body="<p>{{ code }}</p>")
    return key


def _fuzz(operation, base_url: str, headers: dict[str, str]) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case) -> None:
        case.call_and_validate(base_url=base_url, headers=headers,
                               excluded_checks=[positive_data_acceptance])

    run()


def test_api_matches_its_schema(live_server, api_key):
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/v1/schema/?format=json")
    headers = {"Authorization": f"Api-Key {api_key}"}
    operations, failures = [], []
    for result in schema.get_all_operations():
        operation = result.ok()
        operations.append(f"{operation.method.upper()} {operation.path}")
        try:
            _fuzz(operation, live_server.url, headers)
        except Exception as exc:  # noqa: BLE001 - collect every operation's failure, then report
            failures.append(f"{operations[-1]}:\n{exc}")
    assert len(operations) >= 30, operations  # every endpoint of every app
    assert not failures, "\n\n".join(failures)
