"""A fake ESP (SendGrid or Mailgun wire format) in a process of its own, for benchmarks whose
workers run apart (bench/campaign_send.py through a batch API):

    python bench/fake_esp.py --provider sendgrid --seconds 900 > esp.url &
    NOTIFIER_PROVIDERS=sendgrid SENDGRID_API_URL=$(head -1 esp.url) SENDGRID_API_KEY=bench \
        python -m core.worker low &
    ...; kill -TERM <pid>     # or let --seconds run out

Prints its URL on the first line, then, when stopped, how many distinct messages it accepted and
how many it accepted more than once (its ledger).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.esps import FakeEspProcess, ledger_counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", choices=["sendgrid", "mailgun"], default="sendgrid")
    parser.add_argument("--seconds", type=float, default=900, help="stop after this long at most")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="bench-esp-") as tmp:
        esp = FakeEspProcess(args.provider, Path(tmp) / "ledger.jsonl").start()
        try:
            print(esp.url, flush=True)
            stop.wait(args.seconds)
            entries, _ = esp.stop_and_read()
        finally:
            esp.kill()
    distinct, duplicated = ledger_counts(entries)
    print(f"provider={args.provider} accepted={len(entries)} distinct={distinct} duplicates={duplicated}",
          flush=True)


if __name__ == "__main__":
    main()
