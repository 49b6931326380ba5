"""Issue 28's migrations on populated tables: an unsubscribe of a service's mail becomes an
unsubscribe from that service's broadcast stream (it no longer stops an OTP); bounces,
complaints and an operator's unsubscribe with no service keep stopping every stream; old
campaign rows become broadcast mail, one-off rows stay transactional."""

from __future__ import annotations

import pytest

from tests.support.migrations import latest_migrations, migrate_to

BEFORE_CONSENT = [("audience", "0006_suppression_sandbox"), ("delivery", "0014_emailmessage_key_type"),
                  ("campaigns", "0009_campaign_key_type")]


@pytest.mark.django_db(transaction=True)
def test_unsubscribes_move_to_their_services_broadcast_stream_and_campaign_rows_to_broadcast():
    old = migrate_to(BEFORE_CONSENT)
    service = old.get_model("clients", "Service").objects.create(id="svc_old", name="old service")
    template = old.get_model("templates", "Template").objects.create(client_id=service.pk, name="t")
    version = old.get_model("templates", "TemplateVersion").objects.create(
        template=template, version=1, subject="s", html_body="<p>b</p>")
    suppressions = old.get_model("audience", "Suppression").objects
    for email, reason, client_id in [("left@x.io", "unsubscribe", service.pk),
                                     ("imported@x.io", "unsubscribe", None),
                                     ("bounced@x.io", "hard_bounce", service.pk),
                                     ("angry@x.io", "complaint", None)]:
        suppressions.create(email=email, reason=reason, client_id=client_id)
    campaign = old.get_model("campaigns", "Campaign").objects.create(
        name="c", client_id=service.pk, template_version_id=version.pk)
    messages = old.get_model("delivery", "EmailMessage").objects
    for key, campaign_id in [("c:1", campaign.pk), ("c:2", campaign.pk), ("otp", None)]:
        messages.create(client_id=service.pk, recipient="left@x.io", template_version_id=version.pk,
                        idempotency_key=key, campaign_id=campaign_id)

    new = migrate_to(latest_migrations())

    scopes = dict(new.get_model("audience", "Suppression").objects.values_list("email", "scope"))
    assert scopes == {"left@x.io": "broadcast", "imported@x.io": "all", "bounced@x.io": "all",
                      "angry@x.io": "all"}
    streams = dict(new.get_model("delivery", "EmailMessage").objects.values_list("idempotency_key", "stream"))
    assert streams == {"c:1": "broadcast", "c:2": "broadcast", "otp": "transactional"}

    # The send path's rule now lets the OTP through and withholds the newsletter.
    from django.db import connection

    from audience.selectors import message_withheld_sql
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT m.idempotency_key, {message_withheld_sql('m', 'FALSE')} "
                       "FROM delivery_emailmessage m ORDER BY m.idempotency_key")
        assert cursor.fetchall() == [("c:1", True), ("c:2", True), ("otp", False)]
