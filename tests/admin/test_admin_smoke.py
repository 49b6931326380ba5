"""Every registered admin changelist and add page opens (200) with 100,000 messages in the
database, within a bounded number of queries and time, and never counts the message table."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from clients.services import service_create
from delivery.models import EmailMessage
from tests.factories import owner, template_version

MESSAGES = 100_000
MAX_QUERIES = 30
MAX_SECONDS = 5.0   # each page; generous for a loaded 2-core machine


def _bulk_insert_messages(count: int) -> None:
    """One INSERT ... SELECT over a generated series (seconds, not the minutes of bulk_create)."""
    version = template_version()
    client, _ = service_create(name="bulk")
    table = EmailMessage._meta.db_table
    sql = f"""
        INSERT INTO {table} (recipient, context, template_version_id, client_id, priority, status,
            provider, provider_message_id, attempts, idempotency_key, claim_token, error,
            created_at, cancel_key)
        WITH RECURSIVE series(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM series WHERE n < %s)
        SELECT 'user' || n || '@example.com', '{{}}', %s, %s, n %% 4,
            CASE WHEN n %% 10 = 0 THEN 'FAILED' ELSE 'SENT' END, 'smtp', '', 1, 'bulk:' || n, '', '',
            CURRENT_TIMESTAMP, ''
        FROM series
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [count, version.id, client.pk])
        cursor.execute(f"ANALYZE {table}")  # the planner estimate the paginator reads


@pytest.fixture
def superuser_client(client, db):
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def _admin_urls() -> list[str]:
    urls = []
    for model, model_admin in admin.site._registry.items():
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse(f"admin:{info[0]}_{info[1]}_changelist"))
        if model_admin.has_add_permission(_FakeRequest()):
            urls.append(reverse(f"admin:{info[0]}_{info[1]}_add"))
    return urls


class _FakeRequest:
    class user:  # noqa: N801 - mimics request.user
        is_active = is_staff = is_superuser = True

        @staticmethod
        def has_perm(*args: object) -> bool:
            return True


_FULL_COUNT = re.compile(
    rf'SELECT COUNT\(\*\) AS "__count" FROM "{EmailMessage._meta.db_table}"\s*$', re.IGNORECASE
)


@pytest.mark.django_db
def test_every_admin_page_opens_fast_with_100k_messages(superuser_client):
    _bulk_insert_messages(MESSAGES)
    assert EmailMessage.objects.count() == MESSAGES
    problems = []
    for url in _admin_urls():
        with CaptureQueriesContext(connection) as queries:
            started = time.monotonic()
            response = superuser_client.get(url)
            elapsed = time.monotonic() - started
        full_counts = [q["sql"] for q in queries.captured_queries if _FULL_COUNT.search(q["sql"])]
        if response.status_code != 200 or len(queries) > MAX_QUERIES or elapsed > MAX_SECONDS \
                or full_counts:
            problems.append(f"{url}: {response.status_code}, {len(queries)} queries, "
                            f"{elapsed:.2f} s, full counts: {len(full_counts)}")
    assert not problems, "\n".join(problems)


@pytest.mark.django_db
def test_template_admin_shows_a_rendered_preview(superuser_client):
    version = template_version(subject="Hi {{ name }}", html_body="<p>Hello <b>{{ name }}</b></p>")
    url = reverse("admin:templates_template_change", args=[version.template_id])
    html = superuser_client.get(url).content.decode()
    assert "Preview of the current version" in html and "Hi [name]" in html
    assert 'sandbox=""' in html


@pytest.mark.django_db
def test_template_admin_edit_adds_a_version(superuser_client):
    version = template_version(subject="Hi {{ name }}", html_body="<p>{{ name }}</p>")
    url = reverse("admin:templates_template_change", args=[version.template_id])
    form = {"client": version.template.client_id, "name": version.template.name, "is_active": "on",
            "subject": "Hello {{ name }}",
            "html_body": "<p>v2 {{ name }}</p>", "text_body": "",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    response = superuser_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert version.template.current_version.version == 2


@pytest.mark.django_db
def test_key_admin_shows_the_key_once_on_create_with_its_type_prefix(superuser_client):
    from clients.models import Service
    from clients.selectors import api_key_verified

    service = Service.objects.create(name="crm", scopes=["send", "campaigns", "analytics"])
    response = superuser_client.post(reverse("admin:clients_apikey_add"), {
        "service": service.pk, "name": "crm test", "key_type": "test",
        "scopes": ["send", "campaigns"], "rate_limit": "100/min", "endpoint_rate_limits": "{}",
        "expiry_date": ""}, follow=True)
    assert response.status_code == 200
    text = response.content.decode()
    key = re.search(r"New API key crm test: (\S+) ", text).group(1)
    assert key.startswith("ntf_test_")
    api_key = api_key_verified(key)
    assert api_key.service == service and api_key.created_by == "admin:ops"
    assert api_key.scopes == ["send", "campaigns"] and api_key.rate_limit == "100/min"
    assert key not in superuser_client.get(reverse("admin:clients_apikey_changelist")).content.decode()


@pytest.mark.django_db
def test_key_admin_refuses_a_scope_the_service_lacks(superuser_client):
    from clients.models import ApiKey, Service

    service = Service.objects.create(name="crm", scopes=["send"])
    response = superuser_client.post(reverse("admin:clients_apikey_add"), {
        "service": service.pk, "name": "wide", "key_type": "live", "scopes": ["send", "admin"],
        "rate_limit": "", "endpoint_rate_limits": "{}", "expiry_date": ""})
    assert response.status_code == 200  # the form again, with the error
    assert "The service does not hold admin" in response.content.decode()
    assert not ApiKey.objects.exists()


def _changelist_queries(model_admin_class: type[admin.ModelAdmin], user, query: str = "") -> list[str]:
    from django.test import RequestFactory

    request = RequestFactory().get(f"/admin/delivery/emailmessage/{query}")
    request.user = user
    model_admin = model_admin_class(EmailMessage, admin.site)
    # The ChangeList does the counting and paging (the template only needs the delivery
    # app's admin URLs, which this branch does not register).
    with CaptureQueriesContext(connection) as queries:
        changelist = model_admin.get_changelist_instance(request)
        assert len(list(changelist.result_list)) == model_admin.list_per_page
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.django_db
def test_large_table_admin_never_counts_the_whole_message_table(superuser_client):
    """The tool the message admins should adopt: a naive admin counts 100k rows, ours does not."""
    from core.admin_tools import LargeTableAdmin

    _bulk_insert_messages(MESSAGES)
    user = get_user_model().objects.get(username="ops")

    class NaiveAdmin(admin.ModelAdmin):
        list_display = ["id", "recipient", "status"]
        list_filter = ["status"]

    class MessageAdmin(LargeTableAdmin):
        list_display = ["id", "recipient", "status"]
        list_filter = ["status"]
        raw_id_fields = ["template_version", "client", "campaign", "contact"]

    assert any(_FULL_COUNT.search(sql) for sql in _changelist_queries(NaiveAdmin, user))
    assert not any(_FULL_COUNT.search(sql) for sql in _changelist_queries(MessageAdmin, user))
    filtered = _changelist_queries(MessageAdmin, user, "?status__exact=FAILED")
    assert any("LIMIT 10001" in sql for sql in filtered)   # the capped count of a filtered list


@pytest.mark.django_db
def test_template_admin_add_creates_version_one_and_refuses_bad_syntax(superuser_client):
    from templates.models import Template

    url = reverse("admin:templates_template_add")
    form = {"client": owner().pk, "name": "promo", "is_active": "on", "subject": "Hi {{ name }}",
            "html_body": "<p>{{ name }}</p>", "text_body": "",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    bad = superuser_client.post(url, {**form, "html_body": "<p>\n{% if %}"})
    assert bad.status_code == 200 and "html_body line 2" in bad.content.decode()
    assert superuser_client.post(url, form).status_code == 302
    assert Template.objects.get(name="promo").current_version.required_variables == ["name"]


# Django's own lines with the estimate or the capped count in them.
_EXACT_LOOKING_COUNT = re.compile(
    r"\b10,?00[14] (email messages|results)|Select all 10,?00[14]|All 10,?00[14] selected")


@pytest.mark.django_db
def test_an_estimated_count_is_shown_as_approximate(superuser_client):
    """10,004 rows: the list's count is the planner's estimate, a filtered one a capped count;
    neither is printed as if it were exact ("10001 results" for 10,004 rows)."""
    _bulk_insert_messages(10_004)
    html = superuser_client.get("/admin/delivery/emailmessage/").content.decode()
    assert '<span class="count-label">about 10,000</span> email messages' in html
    assert 'Select all <span class="count-label">about 10,000</span> email messages' in html
    assert not _EXACT_LOOKING_COUNT.search(html)
    filtered = superuser_client.get("/admin/delivery/emailmessage/?provider__exact=smtp").content.decode()
    assert '<span class="count-label">more than 10,000</span> results' in filtered
    assert not _EXACT_LOOKING_COUNT.search(filtered)
    # An exact count (under the cap) is Django's own line.
    failed = superuser_client.get("/admin/delivery/emailmessage/?status__exact=FAILED").content.decode()
    assert "1000 results" in failed and "count-label" not in failed
