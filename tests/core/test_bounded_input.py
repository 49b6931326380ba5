"""F21 and F23 at the API boundary: injection, sizes, media types, and the one error shape."""

from __future__ import annotations

import io
import json

import pytest
from django.db import OperationalError
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from core.api.errors import exception_handler
from core.api.fields import CustomHeadersField, RecipientListField, has_line_break
from core.api.parsers import SafeJSONParser
from delivery.models import EmailMessage
from templates.models import Template

pytestmark = pytest.mark.django_db
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "123456"}}
INJECTIONS = [
    "Hi\r\nBcc: victim@example.com",
    "Hi\nBcc: victim@example.com",
    "Hi%0d%0aBcc: victim@example.com",
    "Hi%0ABcc: victim@example.com",
    "Hi%250d%250aBcc: victim@example.com",
    "Hi\u2028Bcc: victim@example.com",
    "Hi\u0085Bcc: victim@example.com",
    "=?utf-8?q?Hi=0D=0ABcc:_victim@example.com?=",
    "=?utf-8?b?SGkNCkJjYzogdmljdGltQGV4YW1wbGUuY29t?=",
]


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    monkeypatch.setattr("transactional.services.messages_enqueue", lambda **kwargs: None)


def _assert_error(response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    if field:
        assert field in error["fields"], error
    return error


@pytest.mark.parametrize("subject", INJECTIONS)
def test_header_injection_in_a_subject_is_refused_and_nothing_written(api, subject):
    response = api.post("/api/v1/templates", {"name": "x", "subject": subject,
                                              "html_body": "<p>hi</p>"}, format="json")
    _assert_error(response, 400, "invalid", "subject")
    assert not Template.objects.exists()


@pytest.mark.parametrize("to", ["ada@example.com\r\nBcc: v@example.com", "ada@example.com%0d%0a",
                                "ada@example.com\u2028", "ada%0a@example.com"])
def test_header_injection_in_an_address_is_refused(api, otp_template, to):
    _assert_error(api.post("/api/v1/messages", {**OTP, "to": to}, format="json"), 400, "invalid", "to")
    assert not EmailMessage.objects.exists()


def test_an_international_domain_is_stored_as_the_wire_carries_it(api, otp_template):
    # ESPs report bounces for user@xn--bcher-kva.example: suppression must match the stored form.
    response = api.post("/api/v1/messages", {**OTP, "to": "Ada@Bücher.example"}, format="json")
    assert response.status_code == 202, response.content
    assert EmailMessage.objects.get().recipient == "Ada@xn--bcher-kva.example"


def test_a_domain_without_an_idna_form_is_a_400_and_nothing_written(api, otp_template):
    # Django's validator accepts any letter-ish code point; IDNA 2008 refuses a symbol (U+2603).
    _assert_error(api.post("/api/v1/messages", {**OTP, "to": "ada@\u2603.example"}, format="json"),
                  400, "invalid", "to")
    assert not EmailMessage.objects.exists()


def test_oversize_body_is_a_413_in_the_shape(api, settings):
    settings.NOTIFIER_API_MAX_BODY_BYTES = 1000
    body = {"name": "big", "subject": "s", "html_body": "x" * 2000}
    _assert_error(api.post("/api/v1/templates", body, format="json"), 413, "too_large")
    assert not Template.objects.exists()


def test_a_non_json_content_type_is_a_415(api):
    response = api.post("/api/v1/templates", "name=x", content_type="application/x-www-form-urlencoded")
    _assert_error(response, 415, "unsupported_media_type")


def test_wrong_method_is_a_405_and_unknown_path_a_404_in_the_shape(api):
    _assert_error(api.put("/api/v1/messages", {}, format="json"), 405, "method_not_allowed")
    _assert_error(api.get("/api/v1/nothing-here"), 404, "not_found")


def test_json_nested_too_deeply_is_a_400(api):
    body = "[" * 100_000 + "]" * 100_000
    _assert_error(api.post("/api/v1/messages", body, content_type="application/json"), 400, "invalid")


@pytest.mark.parametrize("context", [
    {"name": "Ada", "code": "1", "blob": "x" * 70_000},        # > 64 KiB
    {"name": "Ada", "code": "1", "deep": [[[[[[[[[["x"]]]]]]]]]]},
])
def test_unbounded_context_is_refused(api, otp_template, context):
    _assert_error(api.post("/api/v1/messages", {**OTP, "context": context}, format="json"),
                  400, "invalid", "context")
    assert not EmailMessage.objects.exists()


@pytest.mark.parametrize("template", ["99999999999999999999999", "١٢٣", "", "x" * 101])
def test_unknown_or_absurd_template_references_are_a_400(api, otp_template, template):
    _assert_error(api.post("/api/v1/messages", {**OTP, "template": template}, format="json"),
                  400, "invalid", "template")


def test_a_database_outage_is_a_503_not_a_500():
    response = exception_handler(OperationalError("could not connect to server"), {})
    assert response.status_code == 503 and response["Retry-After"]
    assert response.data["error"]["code"] == "unavailable"


def test_custom_headers_are_allowlisted_and_injection_safe(settings):
    settings.NOTIFIER_API_ALLOWED_HEADERS = ["Reply-To", "X-Tag"]
    field = CustomHeadersField()
    assert field.run_validation({"reply-to": "a@example.com"}) == {"Reply-To": "a@example.com"}
    for bad in ({"Bcc": "v@example.com"}, {"X-Tag": "a\r\nBcc: v@example.com"},
                {"X-Tag": "a%0d%0aBcc: v"}, {"X-Tag\r\nBcc": "v"}):
        with pytest.raises(serializers.ValidationError):
            field.run_validation(bad)


def test_recipients_per_call_are_bounded(settings):
    settings.NOTIFIER_API_MAX_RECIPIENTS = 3
    field = RecipientListField()
    assert field.run_validation(["a@example.com", "b@example.com"]) == ["a@example.com", "b@example.com"]
    for bad in ([f"u{n}@example.com" for n in range(4)], [], ["a@example.com", "A@example.com"],
                ["a@example.com\nBcc: v@example.com"]):
        with pytest.raises(serializers.ValidationError):
            field.run_validation(bad)


@pytest.mark.parametrize("value", ["Order 42 \u2013 confirmed", "50% off", "a%20b", "=?utf-8?q?Caf=C3=A9?="])
def test_ordinary_text_is_not_mistaken_for_injection(value):
    assert not has_line_break(value)


@pytest.mark.parametrize("extra", [{"headers": {"Bcc": "v@example.com"}}, {"bcc": "v@example.com"}])
def test_unknown_fields_are_refused_not_ignored(api, otp_template, extra):
    error = _assert_error(api.post("/api/v1/messages", {**OTP, **extra}, format="json"), 400, "invalid")
    assert set(extra) <= set(error["fields"])
    assert not EmailMessage.objects.exists()


_JSON_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _JSON_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_JSON_TEXT, children, max_size=4),
    max_leaves=20,
)
_FORBIDDEN = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])


def _parse(document) -> object:
    raw = json.dumps(document).encode()  # ensure_ascii: what any client library sends
    return SafeJSONParser().parse(io.BytesIO(raw), "application/json", {})


@given(document=_JSON)
@hypothesis_settings(max_examples=200, deadline=None)
def test_any_clean_json_document_parses_unchanged(document):
    assert _parse(document) == document  # emoji arrive as paired-surrogate escapes: accepted


@given(document=_JSON, bad=_FORBIDDEN, data=st.data())
@hypothesis_settings(max_examples=200, deadline=None)
def test_nul_or_a_lone_surrogate_anywhere_is_refused_naming_its_path(document, bad, data):
    holder = {"root": document}
    paths = []  # (container, key, JSON path) of every string value, at any depth
    stack = [(holder, "root", "")]
    while stack:
        container, key, path = stack.pop()
        value = container[key]
        if isinstance(value, str):
            paths.append((container, key, path))
        children = value.items() if isinstance(value, dict) else (
            enumerate(value) if isinstance(value, list) else ())
        for child_key, _ in children:
            child = f"{path}[{child_key}]" if isinstance(child_key, int) else (
                f"{path}.{child_key}" if path else child_key)
            stack.append((value, child_key, child))
    if not paths:
        holder["root"] = {"field": "x"}
        paths = [(holder["root"], "field", "field")]
    container, key, path = data.draw(st.sampled_from(paths))
    container[key] = data.draw(st.text(max_size=3)) + bad + container[key]
    with pytest.raises(ValidationError) as refused:
        _parse(holder["root"])
    assert (path or "body") in refused.value.detail


@given(name=st.sampled_from(["email", "after", "status", "cursor", "x"]),
       value=st.builds(lambda a, b: f"{a}\x00{b}", st.text(max_size=4), st.text(max_size=4)))
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_nul_in_any_query_parameter_is_a_400_naming_it(api, name, value):
    for path in ("/api/v1/suppressions", "/api/v1/campaigns", "/api/v1/templates"):
        _assert_error(api.get(path, {name: value}), 400, "invalid", name)


def test_a_list_header_entry_too_long_for_a_line_is_refused(settings):
    # Issue 32: a `<URL>` entry of a List-* header is never encoded nor broken, so one that cannot
    # fit a 998-octet line on its own (" <URL>," with the folding space) has no legal form.
    settings.NOTIFIER_API_ALLOWED_HEADERS = ["List-Unsubscribe", "X-Tag"]
    field = CustomHeadersField()
    fits = "<https://example.com/" + "a" * 975 + ">"  # folded: " " + 997 = 998
    assert field.run_validation({"List-Unsubscribe": fits}) == {"List-Unsubscribe": fits}
    with pytest.raises(serializers.ValidationError, match="List-Unsubscribe"):
        field.run_validation({"list-unsubscribe": "<https://example.com/" + "a" * 976 + ">"})
    with pytest.raises(serializers.ValidationError, match="List-Unsubscribe"):
        field.run_validation({"List-Unsubscribe": "<https://bücher.example/>"})
    assert field.run_validation({"X-Tag": "t" * 998}) == {"X-Tag": "t" * 998}
