"""Batch-API provider throughput to a local fake ESP (issue 4 target: >= 10,000 recipients/s
sustained over 200,000 recipients on the 2-core machine).

The fake ESP runs in its own process (so it does not share our GIL) and keeps a ledger; the
provider sends pre-rendered, individually personalised emails (own subject, text, HTML and
List-Unsubscribe header each) in requests of 1000 from a few client threads, as several worker
processes would. The script checks 0 lost and 0 duplicates from the fake's ledger.

    python bench/esp_throughput.py --provider sendgrid --recipients 200000 --threads 4 [--shape slots]

`--shape literal` (the default) sends each email's whole rendered bodies (whole-body
substitutions); `--shape slots` renders them from a slot template (templates/slots.py), so a
request carries one body and per-recipient values. Prints this process's CPU time per
recipient (the adapter: body building, JSON/form encoding, HTTP), rendering excluded.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness
from bench.esps import ledger_counts, through_fake_esp

harness.django_setup()

from delivery.providers.base import Outcome, OutgoingEmail  # noqa: E402
from delivery.providers.http import HttpSettings  # noqa: E402

_PARAGRAPH = "This week in the project: releases, fixes and the talks you missed. "


def _emails(n: int, shape: str, filler: int) -> list[OutgoingEmail]:
    if shape == "slots":
        return _slot_emails(n, filler)
    more = _PARAGRAPH * filler
    return [
        OutgoingEmail(
            message_id=i, recipient=f"user{i}@example.com", from_email="news@example.org",
            subject=f"Your weekly digest, reader {i}", text=f"Hello reader {i}, here is your digest.{more}",
            html=f"<p>Hello <b>reader {i}</b>, here is your digest.{more}</p>",
            headers={"List-Unsubscribe": f"<https://example.org/u/{i}>"}, priority=3,
        )
        for i in range(1, n + 1)
    ]


def _slot_emails(n: int, filler: int) -> list[OutgoingEmail]:
    from templates.rendering import compile_version_slots, render_slots

    more = _PARAGRAPH * filler
    html = f"<p>Hello <b>{{{{ name }}}}</b>, here is your digest.{more}</p>"
    text = f"Hello {{{{ name }}}}, here is your digest.{more}"
    slots = compile_version_slots(-1, "Your weekly digest, {{ name }}", html, text)
    emails = []
    for i in range(1, n + 1):
        rendered = render_slots(slots, {"name": f"reader {i}"})
        emails.append(OutgoingEmail(
            message_id=i, recipient=f"user{i}@example.com", from_email="news@example.org",
            subject=rendered.subject, text=rendered.text, html=rendered.html,
            headers={"List-Unsubscribe": f"<https://example.org/u/{i}>"}, priority=3, fill=rendered.fill))
    return emails


def _provider(name: str, url: str):
    settings = HttpSettings(api_key="bench", base_url=url, domain="mg.example.org", read_timeout=60)
    if name == "sendgrid":
        from delivery.providers.sendgrid.provider import SendGridProvider
        return SendGridProvider(settings)
    from delivery.providers.mailgun.provider import MailgunProvider
    return MailgunProvider(settings)


def _send(args: argparse.Namespace, url: str) -> tuple[int, float, float]:
    """(recipients accepted, seconds, CPU seconds of this process) for every email sent in
    batches from `args.threads` threads."""
    emails = _emails(args.recipients, args.shape, args.filler)
    batches = [emails[i:i + args.batch] for i in range(0, len(emails), args.batch)]
    local = threading.local()

    def send(batch: list[OutgoingEmail]) -> int:
        if not hasattr(local, "provider"):
            local.provider = _provider(args.provider, url)
        return sum(r.outcome is Outcome.ACCEPTED for r in local.provider.send_batch(batch))

    started, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(args.threads) as pool:
        accepted = sum(pool.map(send, batches))
    return accepted, time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", choices=["sendgrid", "mailgun"], default="sendgrid")
    parser.add_argument("--recipients", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--shape", choices=["literal", "slots"], default="literal")
    parser.add_argument("--filler", type=int, default=0, help="shared paragraphs added to each body")
    args = parser.parse_args()
    (accepted, elapsed, cpu), entries = through_fake_esp(args.provider, lambda url: _send(args, url))
    distinct, duplicated = ledger_counts(entries)
    print(f"provider={args.provider} shape={args.shape} filler={args.filler} recipients={args.recipients} "
          f"batch={args.batch} threads={args.threads} loadavg={harness.loadavg()}")
    print(f"accepted={accepted} ledger_entries={len(entries)} distinct={distinct} duplicates={duplicated} "
          f"lost={args.recipients - distinct}")
    print(f"elapsed={elapsed:.2f}s throughput={args.recipients / elapsed:,.0f} recipients/s "
          f"cpu_us_per_recipient={cpu / args.recipients * 1e6:,.1f}")


if __name__ == "__main__":
    main()
