"""The schema walked operation by operation, as a newcomer would in Swagger's "Try it out".

1. Every operation whose handler reads a request body documents one (and only those do).
2. Each operation is called, in the order of the tour, with the documented examples and nothing
   else (path ids come from what earlier steps created), on the state `make run` starts with
   (the `demo` client and its `welcome` template, devtools/run.py): each example must work,
   its answer must match the documented status, schema, headers and content type
   (schemathesis' checks), and every documented success status must be seen, so a schema that
   promises 200 where the view answers 201 fails here.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
import requests
import schemathesis
from django.urls import resolve

from clients.services import service_create
from devtools.run import DEMO_TEMPLATE
from templates.services import template_create

pytestmark = pytest.mark.django_db(transaction=True)

# Every operation, in the order a caller meets them: what a step creates, a later one uses.
WALK = [
    "POST /api/v1/templates", "GET /api/v1/templates", "GET /api/v1/templates/{template_id}",
    "PUT /api/v1/templates/{template_id}", "POST /api/v1/templates/{template_id}/render",
    "POST /api/v1/messages", "POST /api/v1/messages/batch", "GET /api/v1/messages/{message_id}",
    "GET /api/v1/messages", "GET /api/v1/messages/{message_id}/events", "GET /api/v1/messages/ambiguous",
    "GET /api/v1/events",
    "POST /api/v1/schedules/cancel",
    "POST /api/v1/contacts/bulk", "POST /api/v1/lists", "GET /api/v1/lists",
    "POST /api/v1/segments", "GET /api/v1/segments", "GET /api/v1/templates/{template_id}/preview",
    "POST /api/v1/suppressions", "GET /api/v1/suppressions", "GET /api/v1/suppressions/{email}",
    "DELETE /api/v1/suppressions/{email}",
    "POST /api/v1/topics", "GET /api/v1/topics", "GET /api/v1/topics/{topic_id}",
    "PATCH /api/v1/topics/{topic_id}", "GET /api/v1/contacts/{contact}/preferences",
    "PUT /api/v1/contacts/{contact}/preferences",
    "POST /api/v1/notifications/email", "GET /api/v1/campaigns", "GET /api/v1/campaigns/{campaign_id}",
    "POST /api/v1/campaigns/{campaign_id}/test", "POST /api/v1/campaigns/{campaign_id}/pause",
    "POST /api/v1/campaigns/{campaign_id}/resume", "GET /api/v1/campaigns/{campaign_id}/stats",
    "POST /api/v1/campaigns/{campaign_id}/cancel",
    "POST /api/v1/schedules", "GET /api/v1/schedules", "GET /api/v1/schedules/{schedule_id}",
    "POST /api/v1/schedules/{schedule_id}/pause", "POST /api/v1/schedules/{schedule_id}/resume",
    "DELETE /api/v1/schedules/{schedule_id}",
    "GET /api/v1/stats/overview", "GET /api/v1/providers",
    "GET /api/v1/service", "PATCH /api/v1/service", "POST /api/v1/keys", "GET /api/v1/keys",
    "GET /api/v1/keys/{key_id}",
    "DELETE /api/v1/keys/{key_id}", "POST /api/v1/team-members", "GET /api/v1/team-members",
    "DELETE /api/v1/team-members/{member_id}",
    "POST /api/v1/oauth-clients", "GET /api/v1/oauth-clients",
    "DELETE /api/v1/oauth-clients/{client_id}",
    "POST /api/v1/webhooks", "GET /api/v1/webhooks", "GET /api/v1/webhooks/{webhook_id}",
    "PATCH /api/v1/webhooks/{webhook_id}", "POST /api/v1/webhooks/{webhook_id}/rotate-secret",
    "GET /api/v1/webhooks/{webhook_id}/deliveries", "POST /api/v1/webhooks/{webhook_id}/replay",
    "DELETE /api/v1/webhooks/{webhook_id}",
    "DELETE /api/v1/topics/{topic_id}", "DELETE /api/v1/templates/{template_id}",
]
# Path parameter <- (the operation whose answer holds it, the field of that answer).
CREATED_BY = {
    "template_id": ("POST /api/v1/templates", "id"),
    "message_id": ("POST /api/v1/messages", "id"),
    "email": ("POST /api/v1/suppressions", "email"),
    "campaign_id": ("POST /api/v1/notifications/email", "campaign_id"),
    "schedule_id": ("POST /api/v1/schedules", "id"),
    "key_id": ("POST /api/v1/keys", "id"),
    "member_id": ("POST /api/v1/team-members", "id"),
    "client_id": ("POST /api/v1/oauth-clients", "client_id"),
    "topic_id": ("POST /api/v1/topics", "id"),
    "webhook_id": ("POST /api/v1/webhooks", "id"),
}
# Path parameters a caller already knows: a contact is named by the address the bulk example sent.
KNOWN = {"contact": "ada@example.com"}


@pytest.fixture
def schema(live_server) -> dict:
    return requests.get(f"{live_server.url}/api/v1/schema/?format=json", timeout=30).json()


@pytest.fixture
def demo_key(transactional_db, purged_queues) -> str:
    """What `make run` starts with: the demo client (default scopes) and its template."""
    client, key = service_create(name="demo")
    template_create(client=client, **DEMO_TEMPLATE)
    return key


def _operations(schema: dict) -> dict[str, dict]:
    return {f"{method.upper()} {path}": operation for path, item in schema["paths"].items()
            for method, operation in item.items()}


def _handler(path: str, method: str) -> Any:
    url = re.sub(r"\{\w+\}", "1", path)
    view = resolve(url).func.view_class
    return inspect.unwrap(getattr(view, method.lower()))


def test_every_operation_reading_a_body_documents_it(schema):
    wrong = []
    for name, operation in _operations(schema).items():
        method, path = name.split(" ", 1)
        reads_body = "request.data" in inspect.getsource(_handler(path, method))
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
        if reads_body and not (body.get("schema") and body.get("examples")):
            wrong.append(f"{name}: reads a body, documents no body schema with examples")
        if body and not reads_body:
            wrong.append(f"{name}: documents a body its handler never reads")
    assert not wrong, "\n".join(wrong)


def _documented_successes(operation: dict) -> set[int]:
    return {int(code) for code in operation["responses"] if code.startswith("2")}


def _request_examples(operation: dict) -> list[Any]:
    content = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if content is None:
        return [None]
    return [example["value"] for example in content["examples"].values()]


def _query_examples(operation: dict) -> dict[str, Any]:
    """The first documented example of each query parameter that has one."""
    return {p["name"]: next(iter(p["examples"].values()))["value"]
            for p in operation.get("parameters", []) if p["in"] == "query" and p.get("examples")}


def test_each_example_works_on_a_fresh_make_run_with_the_documented_answer(live_server, schema, demo_key):
    operations = _operations(schema)
    assert sorted(WALK) == sorted(operations), "add a new operation to WALK, in the tour's order"
    api = schemathesis.openapi.from_dict(schema)
    headers = {"Authorization": f"Api-Key {demo_key}"}
    answers: dict[str, Any] = {}
    seen: dict[str, set[int]] = {name: set() for name in WALK}
    for name in WALK:
        method, path = name.split(" ", 1)
        operation = api[path][method]
        path_parameters = {param: KNOWN.get(param) or answers[CREATED_BY[param][0]][CREATED_BY[param][1]]
                           for param in re.findall(r"\{(\w+)\}", path)}
        for body in _request_examples(operations[name]):
            kwargs = {"body": body} if body is not None else {}
            case = operation.Case(path_parameters=path_parameters, query=_query_examples(operations[name]),
                                  headers=dict(headers), **kwargs)
            response = case.call(base_url=live_server.url)
            assert response.status_code in _documented_successes(operations[name]), (
                f"{name} with {body}: {response.status_code} {response.text[:500]}")
            case.validate_response(response, headers=headers)
            seen[name].add(response.status_code)
            answers.setdefault(name, response.json() if response.content else None)
    unseen = {name: _documented_successes(operations[name]) - statuses for name, statuses in seen.items()
              if _documented_successes(operations[name]) - statuses}
    assert not unseen, f"documented success statuses no example produced: {unseen}"
