"""Query expressions that steer PostgreSQL's planner without changing any result."""

from __future__ import annotations

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
