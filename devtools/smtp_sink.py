"""A local SMTP sink for first runs: stores every received message as an .eml file, and beside it
a .txt with the headers a reader looks for and the decoded text (an .eml holds its bodies base64
encoded, so `cat` shows no text).

python -m devtools.smtp_sink [--host 127.0.0.1] [--port 8025] [--dir var/mail]

aiosmtpd is convenient and caps near 200 messages/s (design notes); benchmarks use Postfix's
smtp-sink instead.
"""

from __future__ import annotations

import argparse
import asyncio
import email.policy
import logging
import time
import uuid
from email import message_from_bytes
from pathlib import Path

from aiosmtpd.controller import Controller

logger = logging.getLogger(__name__)
SHOWN_HEADERS = ("From", "To", "Cc", "Reply-To", "Subject", "Date")


def readable_text(raw: bytes) -> str:
    """The headers a reader looks for, a blank line, then the text body (the HTML one, as is, if
    the message has no text part), decoded."""
    message = message_from_bytes(raw, policy=email.policy.default)
    lines = [f"{name}: {message[name]}" for name in SHOWN_HEADERS if message[name] is not None]
    body = message.get_body(preferencelist=("plain", "html"))
    text = body.get_content() if body is not None else ""
    return "\n".join(lines) + "\n\n" + text.rstrip("\n") + "\n"


def _write_atomically(path: Path, data: bytes) -> None:
    """Write, then rename: a reader never sees half a file (nor a name that ends in .part)."""
    partial = path.with_name(f".{path.name}.part")
    partial.write_bytes(data)
    partial.rename(path)


class EmlFileHandler:
    """aiosmtpd handler writing one file per accepted message (write, then rename: atomic)."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd API
        eml = self.directory / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.eml"
        raw = envelope.original_content or envelope.content
        try:  # the .txt first: once the .eml is there, so is its readable twin
            _write_atomically(eml.with_suffix(".txt"), readable_text(raw).encode())
        except Exception:  # a message we cannot decode is still accepted and kept as it came
            logger.exception("no readable .txt for %s", eml.name)
        _write_atomically(eml, raw)
        return "250 Message accepted for delivery"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8025)
    parser.add_argument("--dir", default="var/mail")
    args = parser.parse_args()
    controller = Controller(EmlFileHandler(Path(args.dir)), hostname=args.host, port=args.port)
    controller.start()
    print(f"SMTP sink on {args.host}:{args.port}, writing to {args.dir}/", flush=True)
    try:
        asyncio.run(asyncio.Event().wait())
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
