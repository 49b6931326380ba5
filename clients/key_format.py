"""What a key looks like on the wire: a fixed prefix per key type, for secret scanners.

    ntf_live_Ab12Cd34.<32 characters>     a live key
    ntf_team_Ab12Cd34.<32 characters>     a team key
    ntf_test_Ab12Cd34.<32 characters>     a test key (sends nothing)

`Ab12Cd34.<secret>` is djangorestframework-api-key's key: its 8-character public prefix (the key's
id in the API and the admin) and the secret, whose SHA-512 hash is stored. The type prefix is not
part of what is hashed; it is checked against the key's type, so a key cannot be passed off as
another type. Keys made before issue 27 have no type prefix and keep working. A secret scanner
matches `ntf_(live|team|test)_[A-Za-z0-9]{8}\\.[A-Za-z0-9]{32}` (docs/api.md).
"""

from __future__ import annotations

from clients.key_types import KeyType

SCANNER_PREFIXES: dict[str, str] = {
    KeyType.LIVE: "ntf_live_", KeyType.TEAM: "ntf_team_", KeyType.TEST: "ntf_test_",
}


def key_for_wire(key_type: str, library_key: str) -> str:
    """The key as the caller receives it once."""
    return SCANNER_PREFIXES[key_type] + library_key


def key_from_wire(presented: str) -> tuple[str | None, str]:
    """(the type its prefix claims, or None for a key made before types; the library's key)."""
    for key_type, prefix in SCANNER_PREFIXES.items():
        if presented.startswith(prefix):
            return key_type, presented[len(prefix):]
    return None, presented
