"""Request sizes of one batch of large, different bodies (issue 12: 1,000 x ~34 KB made one
33 MB SendGrid and one 34 MB Mailgun request, over their 30 MB and 25 MB limits).

Sends the batch to the fake SendGrid and Mailgun (which refuse a body over the documented limit
with a 413, as the real ones do) and prints each request's size, what one request would have
weighed, and lost/duplicate counts from the fakes' ledgers.

    python bench/esp_request_sizes.py --recipients 1000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")

from delivery.providers.base import Outcome, OutgoingEmail
from delivery.providers.http import HttpSettings
from delivery.providers.mailgun.provider import MailgunProvider, message_form
from delivery.providers.sendgrid.provider import SendGridProvider, mail_send_body
from testkit.fakes import FakeMailgun, FakeSendGrid

FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 290  # ~16.8 KB


def _batch(n: int) -> list[OutgoingEmail]:
    return [OutgoingEmail(i + 1, f"user{i}@example.com", "news@example.com", f"Hello {i}",
                          f"{i} {FILLER}", f"<p>{i} {FILLER}</p>") for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=1000)
    args = parser.parse_args()
    batch = _batch(args.recipients)
    print(f"as one request: SendGrid {len(json.dumps(mail_send_body(batch))):,} bytes, "
          f"Mailgun {len(urlencode(message_form(batch))):,} bytes")
    with FakeSendGrid() as sendgrid, FakeMailgun() as mailgun:
        providers = [
            (sendgrid, SendGridProvider(HttpSettings("test-sendgrid-key", sendgrid.url, read_timeout=60,
                                                     max_request_bytes=30_000_000))),
            (mailgun, MailgunProvider(HttpSettings("test-mailgun-key", mailgun.url, read_timeout=60,
                                                   domain="mg.example.org", max_request_bytes=25_000_000))),
        ]
        for fake, provider in providers:
            started = time.monotonic()
            results = provider.send_batch(batch)
            elapsed = time.monotonic() - started
            got = fake.ledger.by_message_id()
            lost = sum(str(e.message_id) not in got for e in batch)
            duplicates = sum(len(v) > 1 for v in got.values())
            accepted = sum(r.outcome is Outcome.ACCEPTED for r in results)
            sizes = ", ".join(f"{size:,}" for size in fake.request_sizes())
            print(f"{fake.name}: requests [{sizes}] bytes; accepted {accepted}, lost {lost}, "
                  f"duplicates {duplicates}, {elapsed:.2f} s")


if __name__ == "__main__":
    import django

    django.setup()
    main()
