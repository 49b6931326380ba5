"""Topic choices in bulk loads (issue 28): the bulk contacts API's `topics` and the CSV import's
`topic:<name>` columns, applied with source import, recorded only where they change something."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audience.models import ConsentChange, Contact, Suppression, Topic, TopicSubscription
from tests import factories


def _topic(name: str, **fields) -> Topic:
    return Topic.objects.create(client=factories.owner(), name=name, **fields)


def _states(topic: Topic) -> dict[str, bool]:
    return dict(TopicSubscription.objects.filter(topic=topic).values_list("email", "subscribed"))


def _history() -> list[tuple[str, str, bool, str]]:
    return sorted(ConsentChange.objects.values_list("email", "topic__name", "subscribed", "source"))


@pytest.mark.django_db
def test_bulk_rows_carry_topic_choices_recorded_once(api):
    news, digest = _topic("news"), _topic("digest", default_subscribed=False)
    rows = [{"email": "Ada@example.com", "topics": {"news": False, str(digest.pk): True}},
            {"email": "grace@example.com", "topics": {"news": True}},  # its default: no change
            {"email": "alan@example.com"}]
    response = api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json")
    assert response.status_code == 200 and response.json()["created"] == 3, response.content
    assert _states(news) == {"ada@example.com": False, "grace@example.com": True}
    assert _states(digest) == {"ada@example.com": True}
    expected = [("ada@example.com", "digest", True, "import"), ("ada@example.com", "news", False, "import")]
    assert _history() == expected
    # The same rows again: nothing changes, nothing is recorded.
    assert api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json").json()["updated"] == 3
    assert _history() == expected


@pytest.mark.django_db
def test_bulk_refuses_a_row_naming_an_unknown_topic_or_joining_one_after_a_bounce(api):
    _topic("news")
    _topic("gone", archived_at="2026-01-01T00:00:00Z")
    Suppression.objects.create(email="bounced@example.com", reason="hard_bounce")
    rows = [{"email": "a@example.com", "topics": {"nope": False}},
            {"email": "b@example.com", "topics": {"gone": False}},
            {"email": "c@example.com", "topics": {"news": "yes"}},
            {"email": "bounced@example.com", "topics": {"news": True}},
            {"email": "ok@example.com", "topics": {"news": False}}]
    body = api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json").json()
    assert [(e["index"], list(e["errors"])) for e in body["errors"]] == [
        (0, ["topics.nope"]), (1, ["topics.gone"]), (2, ["topics.news"]), (3, ["topics.news"])]
    assert "suppressed for every stream (hard_bounce)" in body["errors"][3]["errors"]["topics.news"][0]
    assert body["created"] == 1
    assert list(Contact.objects.values_list("email", flat=True)) == ["ok@example.com"]
    assert _history() == [("ok@example.com", "news", False, "import")]


@pytest.mark.django_db
def test_bulk_rows_without_topics_cost_no_query_for_topics(api):
    _topic("news")
    rows = [{"email": f"u{i}@example.com", "name": "U"} for i in range(50)]
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/api/v1/contacts/bulk", {"contacts": rows}, format="json").status_code == 200
    touched = [q["sql"] for q in queries if "topic" in q["sql"] or "suppression" in q["sql"]]
    assert touched == []


def _import(tmp_path, text: str, *args: str) -> str:
    path = tmp_path / "contacts.csv"
    path.write_text(text)
    out = StringIO()
    call_command("import_contacts", str(path), "--service", factories.owner().name, *args, stdout=out,
                 stderr=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)  # the importer writes from its own thread's connection
def test_import_topic_columns_are_choices_recorded_only_when_they_change(tmp_path):
    news, digest = _topic("news"), _topic("digest", default_subscribed=False)
    TopicSubscription.objects.create(topic=news, email="grace@example.com", subscribed=False)
    Suppression.objects.create(email="bounced@example.com", reason="complaint")
    text = ("email,name,topic:news,topic:digest\n"
            "ada@example.com,Ada,no,yes\n"
            "grace@example.com,Grace,no,\n"        # already so: nothing recorded
            "alan@example.com,Alan,,\n"            # no choice at all
            "bad@example.com,Bad,maybe,\n"
            "bounced@example.com,B,,yes\n"
            "kay@example.com,Kay,yes,no\n")         # both their default: nothing recorded
    output = _import(tmp_path, text)
    assert "2 invalid" in output and "line 5: topic:news must be yes or no" in output, output
    assert "line 6: not imported" in output and "(complaint)" in output, output
    assert set(Contact.objects.values_list("email", flat=True)) == {
        "ada@example.com", "grace@example.com", "alan@example.com", "kay@example.com"}
    assert not Contact.objects.filter(attributes__has_key="topic:news").exists()
    assert _states(news) == {"ada@example.com": False, "grace@example.com": False, "kay@example.com": True}
    assert _states(digest) == {"ada@example.com": True, "kay@example.com": False}
    expected = [("ada@example.com", "digest", True, "import"), ("ada@example.com", "news", False, "import")]
    assert _history() == expected
    path = tmp_path / "again.csv"
    path.write_text(text)
    call_command("import_contacts", str(path), "--service", factories.owner().name, stdout=StringIO(),
                 stderr=StringIO())
    assert _history() == expected


@pytest.mark.django_db(transaction=True)
def test_import_with_a_column_naming_no_topic_writes_nothing(tmp_path):
    _topic("gone", archived_at="2026-01-01T00:00:00Z")
    for column in ("topic:nope", "topic:gone"):
        with pytest.raises(CommandError, match=column):
            _import(tmp_path, f"email,{column}\nada@example.com,yes\n")
    assert not Contact.objects.exists() and not TopicSubscription.objects.exists()
