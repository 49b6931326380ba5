"""A local SMTP sink for first runs: stores every received message as an .eml file.

python -m devtools.smtp_sink [--host 127.0.0.1] [--port 8025] [--dir var/mail]

aiosmtpd is convenient and caps near 200 messages/s (design notes); benchmarks use Postfix's
smtp-sink instead.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from pathlib import Path

from aiosmtpd.controller import Controller


class EmlFileHandler:
    """aiosmtpd handler writing one file per accepted message (write, then rename: atomic)."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd API
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.eml"
        partial = self.directory / f".{name}.part"
        partial.write_bytes(envelope.original_content or envelope.content)
        partial.rename(self.directory / name)
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
