"""What each web process remembers on the accept path, and how a change reaches it (decision 53).

The current template version (a Redis generation counter: every process sees a publish on its
next request), the verified API key and the send guards' verdict (a few seconds per process).
Real web processes (the Procfile's server, 2 workers) against the test database and Redis; the
changes are made from this process, as an operator's or another web process's would be.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clients.services import api_key_revoke
from delivery.models import EmailMessage
from feedback.models import ReputationHold
from templates.services import template_update
from testkit import processes
from testkit.ports import free_port
from tests import factories
from tests.support.web import post_otp, wait_until_serving

pytestmark = [pytest.mark.e2e]
# Enough requests, each on a new connection, that both web workers answer some of them.
ROUNDS = 12
OTP = {"to": "ada@example.com", "template": "otp", "priority": "critical",
       "context": {"name": "Ada", "code": "1"}}


def _serve(spawn, env: dict[str, str], tmp_path) -> str:
    port = free_port()
    spawn(processes.web_server(env, tmp_path, port, workers=2))
    wait_until_serving(port)
    return f"http://127.0.0.1:{port}"


def _statuses(base_url: str, key: str) -> list[int]:
    return [post_otp(base_url, key, n).status_code for n in range(ROUNDS)]


def _accepted_ids(base_url: str, key: str) -> list[int]:
    responses = [post_otp(base_url, key, n) for n in range(ROUNDS)]
    assert [r.status_code for r in responses] == [202] * ROUNDS, responses[0].text
    return [r.json()["id"] for r in responses]


@pytest.mark.django_db
def test_a_send_reads_neither_key_nor_hold_nor_template_again(api, otp_template, settings):
    settings.NOTIFIER_API_KEY_CACHE_SECONDS = 5.0  # the test session verifies every key
    assert api.post("/api/v1/messages", OTP, format="json").status_code == 202
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/api/v1/messages", OTP, format="json").status_code == 202
    # The test's own transaction puts the insert under a savepoint (execute_routed: a missing day
    # partition is created and the insert run again); a request in autocommit has none.
    statements = [query["sql"] for query in queries if "SAVEPOINT" not in query["sql"]]
    assert len(statements) == 1 and "INSERT INTO delivery_emailmessage" in statements[0], statements


def test_a_new_template_version_is_sent_by_every_web_process_at_once(process_env, api_key,
                                                                      otp_template, spawn, tmp_path):
    base_url = _serve(spawn, process_env, tmp_path)
    first = _accepted_ids(base_url, api_key)  # each worker now holds version 1
    template_update(template=otp_template.template, subject="New code {{ code }}",
                    html_body="<p>{{ name }}: {{ code }}</p>")
    second = _accepted_ids(base_url, api_key)
    versions = dict(EmailMessage.objects.filter(pk__in=first + second)
                    .values_list("id", "template_version__version"))
    assert {versions[i] for i in first} == {1}
    assert {versions[i] for i in second} == {2}


def test_a_revoked_key_is_refused_by_every_web_process_within_the_cache_seconds(
        process_env, api_key, otp_template, spawn, tmp_path):
    cache_seconds = 2.0
    base_url = _serve(spawn, {**process_env, "NOTIFIER_API_KEY_CACHE_SECONDS": str(cache_seconds)},
                      tmp_path)
    assert _statuses(base_url, api_key) == [202] * ROUNDS
    api_key_revoke(api_key=factories.owner().api_keys.get())
    time.sleep(cache_seconds + 0.2)
    assert _statuses(base_url, api_key) == [401] * ROUNDS


def test_a_reputation_hold_and_its_release_reach_every_web_process_within_the_cache_seconds(
        process_env, api_key, otp_template, spawn, tmp_path):
    cache_seconds = 1.0
    env = {**process_env, "NOTIFIER_SEND_GUARD_CACHE_SECONDS": str(cache_seconds)}
    base_url = _serve(spawn, env, tmp_path)
    assert _statuses(base_url, api_key) == [202] * ROUNDS
    hold = ReputationHold.objects.create(
        scope=ReputationHold.Scope.CLIENT, client=factories.owner(), metric="bounce_rate",
        rate=0.1, threshold=0.02, sample=500, reason="held in test")
    time.sleep(cache_seconds + 0.2)
    assert _statuses(base_url, api_key) == [403] * ROUNDS
    hold.released_at = timezone.now()
    hold.save()
    time.sleep(cache_seconds + 0.2)
    assert _statuses(base_url, api_key) == [202] * ROUNDS

