"""Team keys send only to the service's team list (GOV.UK Notify's team and guest list).

A send API calls `team_list_check` with the caller and the addresses it would send to: for a
team key, one query over the team list; for any other key, nothing at all.
"""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework import serializers

from clients.caller import Caller
from clients.key_types import KeyType
from clients.models import TeamMember


def team_list_outsiders(caller: Caller, addresses: Iterable[str]) -> list[str]:
    """The addresses a team key may not send to (none for other keys), in the order given."""
    if caller.key_type != KeyType.TEAM:
        return []
    wanted = [address.lower() for address in addresses]
    members = set(TeamMember.objects.filter(service=caller.service, email__in=wanted)
                  .values_list("email", flat=True))
    return [address for address in wanted if address not in members]


def team_list_check(caller: Caller, addresses: Iterable[str], *, field: str) -> None:
    """400 naming `field` when a team key would send outside the team list."""
    outsiders = team_list_outsiders(caller, addresses)
    if outsiders:
        shown = ", ".join(outsiders[:5]) + (" ..." if len(outsiders) > 5 else "")
        raise serializers.ValidationError({field: [
            f"A team key sends only to the service's team list (/api/v1/team-members); not on it: "
            f"{shown}."]})


def team_key_audience_check(caller: Caller, recipients: object, *,
                            field: str = "recipients") -> None:
    """A team key's campaign goes to inline recipients on the team list only: a list or a
    segment could hold anyone. `field`: where the recipients are in the request's body."""
    if caller.key_type != KeyType.TEAM:
        return
    if not isinstance(recipients, dict) or recipients.get("type") != "inline":
        raise serializers.ValidationError({field: [
            "A team key sends campaigns to inline recipients on the team list only."]})
    contacts = recipients.get("contacts") or []
    team_list_check(caller, [str(c.get("email", "")) for c in contacts if isinstance(c, dict)],
                    field=field)
