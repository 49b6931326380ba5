"""python manage.py partition_tables [--batch-size N] [--pause SECONDS] [--max-batches N] [--table T]
                                    [--abort]

Move an existing install's messages, attempts, ESP events and marks into the day-partitioned
layout (decision 122) while the system runs: a partitioned copy kept in step by a trigger, the
old rows copied in batches of one short transaction each, then a swap under a lock held for
milliseconds. Interrupted anywhere (Ctrl-C, a crash, --max-batches), run it again: it goes on
where it stopped. Tables already partitioned are skipped; the marks wait for the messages
(their days are the messages' days). `--abort` undoes a conversion not yet swapped (the trigger
and the copy go; the old table was never changed). Progress: the table notifier_partition_move.
docs/operations.md "Partitioning an existing install".
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.partitions.convert import ConversionError, abort, convert
from core.partitions.spec import registered


class Command(BaseCommand):
    help = "Move the big tables into day partitions while the system runs (batched, resumable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=10_000, metavar="N")
        parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                            help="sleep between batches (gives the live path the disk)")
        parser.add_argument("--max-batches", type=int, default=None, metavar="N",
                            help="stop after N batches per table (run again to go on)")
        parser.add_argument("--table", action="append", default=None, metavar="TABLE",
                            help="only this table (repeatable); default: every partitioned table")
        parser.add_argument("--abort", action="store_true",
                            help="undo a conversion that has not swapped yet (the old table stays)")

    def handle(self, *args: object, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        specs = registered()
        chosen = options["table"]
        unknown = set(chosen or ()) - {spec.table for spec in specs}
        if unknown:
            raise CommandError(f"--table: not a partitioned table: {', '.join(sorted(unknown))} "
                               f"(known: {', '.join(spec.table for spec in specs)})")
        verbose = options["verbosity"] > 1
        chosen_specs = [spec for spec in specs if not chosen or spec.table in chosen]
        if options["abort"]:  # the marks first: they wait for the messages
            chosen_specs.reverse()
        for spec in chosen_specs:
            try:
                outcome = abort(spec) if options["abort"] else convert(
                    spec, batch_size=options["batch_size"], pause=options["pause"],
                    max_batches=options["max_batches"], log=self.stdout.write if verbose else lambda _: None)
            except ConversionError as refused:
                raise CommandError(str(refused)) from refused
            self.stdout.write(outcome)
