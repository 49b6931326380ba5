"""Reads on the audience: may an address be mailed (suppressions, consent), what a contact brings
to a template."""

from __future__ import annotations

from audience.models import Stream, Suppression, Topic, TopicSubscription

SUPPRESSION_TABLE = Suppression._meta.db_table
TOPIC_TABLE = Topic._meta.db_table
SUBSCRIPTION_TABLE = TopicSubscription._meta.db_table
_ALL = Suppression.Scope.ALL.value
_BROADCAST = Suppression.Scope.BROADCAST.value


def email_is_suppressed(*, email: str, sandbox: bool = False) -> bool:
    """Is the address suppressed for every stream? `sandbox`: a test key's send, matched against
    the test key's suppressions only."""
    return Suppression.objects.filter(email=email.lower(), sandbox=sandbox, scope=_ALL).exists()


def email_is_suppressed_sql(address: str = "%s", sandbox: str = "FALSE") -> str:
    """email_is_suppressed as a boolean SQL expression, for a statement that decides in one round
    trip. `address` is the SQL of the lower-cased address (as email_is_suppressed compares): by
    default one parameter, or e.g. `lower(m.recipient)` for a row the statement reads. `sandbox`:
    SQL of whether the send is a test key's (a constant, a parameter, or the row's own
    `message_is_test_sql`): live and test suppressions never stop each other's sends. One probe
    of the all-streams unique index (its columns and its condition). The subqueries' aliases
    (sup_all, sup_bc, sub, tpc) are their own: an outer alias they shadowed would be read as theirs."""
    return (f"EXISTS (SELECT 1 FROM {SUPPRESSION_TABLE} sup_all WHERE sup_all.email = {address} "
            f"AND sup_all.sandbox = {sandbox} AND sup_all.scope = '{_ALL}')")


def broadcast_withheld_sql(address: str, sandbox: str, service: str, topic: str) -> str:
    """SQL: has the recipient left this service's broadcast stream, or the topic? `service` and
    `topic` are SQL (a parameter, a constant or the row's columns; a NULL topic: no topic). Not
    the all-streams suppressions: OR it with email_is_suppressed_sql. A topic with no choice of
    the recipient's falls back to the topic's default."""
    return (
        f"(EXISTS (SELECT 1 FROM {SUPPRESSION_TABLE} sup_bc WHERE sup_bc.email = {address} "
        f"AND sup_bc.sandbox = {sandbox} AND sup_bc.client_id = {service} AND sup_bc.scope = '{_BROADCAST}') "
        f"OR ({topic} IS NOT NULL AND NOT COALESCE("
        f"(SELECT sub.subscribed FROM {SUBSCRIPTION_TABLE} sub "
        f"WHERE sub.topic_id = {topic} AND sub.email = {address}), "
        f"(SELECT tpc.default_subscribed FROM {TOPIC_TABLE} tpc WHERE tpc.id = {topic}), TRUE)))"
    )


def message_withheld_sql(alias: str, sandbox: str) -> str:
    """SQL: may the message row `alias` not be sent to its recipient? Its address is suppressed
    for every stream, or (broadcast mail) the recipient left the sending service's broadcast
    stream or the message's topic. A transactional row costs the one probe it always did."""
    address = f"lower({alias}.recipient)"
    return (
        f"({email_is_suppressed_sql(address, sandbox)} OR ({alias}.stream = '{Stream.BROADCAST.value}' AND "
        f"{broadcast_withheld_sql(address, sandbox, f'{alias}.client_id', f'{alias}.topic_id')}))"
    )


def contact_merge_data_sql(alias: str) -> str:
    """A contact's template data as SQL over the contact row `alias`: its attributes, then its
    email, name, timezone and locale (these four win). What a campaign message renders with,
    under the audience's own per-recipient data (docs/decisions.md 65); the preview's Python
    twin is campaigns/api/preview.py `contact_context`."""
    return (
        f"{alias}.attributes || jsonb_build_object('email', {alias}.email, 'name', {alias}.name, "
        f"'timezone', {alias}.timezone, 'locale', {alias}.locale)"
    )
