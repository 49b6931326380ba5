"""Email domains in their ASCII form: IDNA 2008 A-labels with the UTS 46 mapping.

One encoder for the API (which stores the form it accepts) and every delivery provider (which
puts it on the wire): an address the API accepts can always be encoded at send time, and the
address an ESP reports back in a bounce or complaint (`user@xn--bcher-kva.example`) is the
very string stored with the message, so send-time suppression finds it. The `idna` package,
not Python's `idna` codec: the codec implements IDNA 2003, which maps `faß.de` to `fass.de`
where registries and MTAs now use `xn--fa-hia.de`.
"""

from __future__ import annotations

import idna


class AddressError(ValueError):
    """An address that cannot be put on the wire; no retry will change that."""


def ascii_domain(domain: str) -> str:
    """The domain's A-label form; an ASCII domain is returned exactly as given."""
    if domain.isascii():
        return domain
    try:
        return idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError as exc:
        raise AddressError(f"domain {domain!r} has no IDNA form: {exc}") from None


def ascii_domain_address(addr_spec: str) -> str:
    """`local@domain` with the domain in A-label form (the local part is left as it is); a value
    without `@` is returned as it is, for the address validator to refuse."""
    local_part, at, domain = addr_spec.rpartition("@")
    return f"{local_part}@{ascii_domain(domain)}" if at else addr_spec
