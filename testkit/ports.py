"""A free TCP port on 127.0.0.1 for a server a test or a benchmark starts."""

import socket


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
