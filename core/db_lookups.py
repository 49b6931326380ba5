"""Query expressions that steer PostgreSQL's planner without changing any result."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import CharField, Transform


class Unindexed(Transform):
    """`field__unindexed=value`: the same comparison, which no index on `field` can answer.

    For statements that name their rows by primary key and also test a low-cardinality column
    (a message's status): the planner must then walk the ids, never the column's index, whose
    statistics and dead entries lag far behind a running campaign (decisions 67 and 68).
    """

    lookup_name = "unindexed"
    template = "(%(expressions)s || '')"


# On every CharField, not one field of one model: migrations build their own copies of the
# models, and an index whose condition uses the lookup (delivery 0019) needs it there too.
CharField.register_lookup(Unindexed)


@contextmanager
def planner_settings(settings: Mapping[str, str]) -> Iterator[None]:
    """These planner settings for the statements run inside, and only those: SET LOCAL in a
    transaction (the caller's, under a savepoint, or one of its own), put back to the default
    at the end (a savepoint's release keeps a SET LOCAL; its rollback, on an error, undoes it)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for name, value in settings.items():
            cursor.execute(f"SET LOCAL {name} TO {value}")
        yield
        for name in settings:
            cursor.execute(f"SET LOCAL {name} TO DEFAULT")
