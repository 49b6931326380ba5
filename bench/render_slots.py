"""Benchmark: CPU per message of rendering a campaign template, full renderer vs slots.

    python bench/render_slots.py [--messages 5000] [--filler 0]

The full renderer is sandboxed Jinja + css-inline + inscriptis (text derived from the HTML);
slots (templates/slots.py, decision 56) join the version's static parts with each recipient's
escaped values. `--filler N` adds N shared paragraphs to the HTML (a longer newsletter).
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


if __name__ == "__main__":
    main()
