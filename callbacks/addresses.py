"""Which receiver URLs and addresses a callback may go to (SSRF), checked twice.

At registration the URL's scheme and host are checked and the host is resolved: an address
that is loopback, private, link-local, multicast, reserved or unspecified is refused (loopback
and private ones, and plain http, are allowed where NOTIFIER_CALLBACKS_ALLOW_LOOPBACK=true: tests
and `make run`). At each delivery the host is resolved again and the POST connects to the very
address that passed the check (callbacks/http.py), so a DNS answer that changes in between
(rebinding) cannot send it elsewhere. Link-local (cloud metadata at 169.254.169.254) is never
allowed.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefusedError(ValueError):
    """A URL or an address a callback may not go to; the message says why."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with its query


def parse_target(url: str) -> Target:
    """The URL's parts, or AddressRefusedError for a scheme, host or form we do not post to."""
    parts = urlsplit(url)
    allowed = ("https", "http") if settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK else ("https",)
    if parts.scheme not in allowed:
        raise AddressRefusedError(f"The URL must be https:// (not {parts.scheme or 'schemeless'}).")
    if parts.username or parts.password:
        raise AddressRefusedError("The URL may not carry credentials.")
    if not parts.hostname:
        raise AddressRefusedError("The URL has no host.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise AddressRefusedError("The URL's port is invalid.") from error
    path = parts.path or "/"
    return Target(parts.scheme, parts.hostname, port, f"{path}?{parts.query}" if parts.query else path)


def address_problem(address: IpAddress) -> str | None:
    """Why a callback may not go to this address, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    allowed_locally = settings.NOTIFIER_CALLBACKS_ALLOW_LOOPBACK
    if address.is_loopback:  # before "reserved": ::1 is in IPv6's reserved ::/8
        return None if allowed_locally else "a loopback address"
    if address.is_link_local or address.is_multicast or address.is_unspecified or address.is_reserved:
        return "a link-local, multicast, reserved or unspecified address"
    if not address.is_global and not allowed_locally:
        return "a private address"
    return None


def _refusal(host: str, address: IpAddress, problem: str) -> AddressRefusedError:
    if host.strip("[]") == str(address):
        return AddressRefusedError(f"{address} is {problem}.")
    return AddressRefusedError(f"{host} resolves to {address}, {problem}.")


def resolve(host: str, port: int) -> list[IpAddress]:
    """The host's addresses (an IP literal is itself); [] when the name does not resolve."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def checked_addresses(target: Target) -> list[IpAddress]:
    """The target's addresses, all allowed; AddressRefusedError when one is not (any one: a
    rebinding answer mixes a public address with a private one) or when none resolves."""
    addresses = resolve(target.host, target.port)
    if not addresses:
        raise AddressRefusedError(f"{target.host} does not resolve.")
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise _refusal(target.host, address, problem)
    return addresses


def registration_check(url: str) -> None:
    """At registration: the URL's form, and its addresses when it resolves (a name that does not
    resolve yet is accepted; each delivery checks again)."""
    target = parse_target(url)
    addresses = resolve(target.host, target.port)
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise _refusal(target.host, address, problem)
