"""Benchmark: CPU per message of rendering a campaign template, full renderer vs slots.

    python bench/render_slots.py [--messages 5000] [--filler 0] [--footer]

The full renderer is sandboxed Jinja + css-inline + inscriptis (text derived from the HTML);
slots (templates/slots.py, decision 56) join the version's static parts with each recipient's
escaped values. `--filler N` adds N shared paragraphs to the HTML (a longer newsletter).
`--footer` also times what broadcast mail adds per message (issue 28, decision 108): the
recipient's signed preference link and one-click token, and the slot render with the
platform's footer around the link.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

SUBJECT = "Hello {{ name }}, this is a notifier demo"
HTML = ("<h1>Hi {{ name }}</h1><p>This campaign went out to everyone on the demo list.</p>"
        '<p><a href="https://example.org/offers?ref={{ ref }}">See the offers</a></p>{filler}')
PARAGRAPH = "<p>This week in the project: releases, fixes and the talks you missed.</p>"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--filler", type=int, default=0)
    parser.add_argument("--footer", action="store_true")
    args = parser.parse_args()
    harness.django_setup()
    from templates.rendering import compile_version, compile_version_slots, render, render_slots

    html = HTML.replace("{filler}", PARAGRAPH * args.filler)
    key = (-7, SUBJECT, html, "")
    slots = compile_version_slots(*key)
    contexts = [{"name": f"Person {i} & co", "ref": f"r{i}"} for i in range(args.messages)]
    started = time.process_time()
    for context in contexts:
        render(compile_version(*key), context)
    full = (time.process_time() - started) / args.messages * 1e6
    started = time.process_time()
    fast = sum(render_slots(slots, context) is not None for context in contexts)
    joined = (time.process_time() - started) / args.messages * 1e6
    print(f"messages={args.messages} filler={args.filler} loadavg={harness.loadavg()} "
          f"full_us_per_message={full:,.1f} slots_us_per_message={joined:,.1f} slot_renders={fast}")
    if args.footer:
        before, after = _broadcast(key, contexts, footer=False), _broadcast(key, contexts, footer=True)
        print(f"one_click_slots_us_per_message={before:,.1f} (one link + slots, as campaign mail before) "
              f"broadcast_slots_us_per_message={after:,.1f} (two links + slots with the footer)")


def _broadcast(key: tuple, contexts: list[dict], *, footer: bool) -> float:
    """CPU per message of a broadcast message's links and slot render: its one-click link, and
    with `footer` its preference link and the version's slots with the platform's footer (as
    consent/links.py and sending.outgoing_email do)."""
    from consent.links import preferences_footer
    from consent.tokens import preferences_url, unsubscribe_token, unsubscribe_url
    from templates.rendering import _slots_for, render_slots

    slots = _slots_for(key, preferences_footer("") if footer else None)
    started = time.process_time()
    for i, context in enumerate(contexts):
        unsubscribe_url(unsubscribe_token(contact_id=i, campaign_id=7))
        if footer:
            url = preferences_url(service_id="svc_bench", email=f"person{i}@example.com")
            context = {**context, "preferences_url": url}
        render_slots(slots, context)
    return (time.process_time() - started) / len(contexts) * 1e6


if __name__ == "__main__":
    main()
