"""Fan-out: turn a campaign's audience into message rows inside PostgreSQL, chunk by chunk.

One statement per chunk of ~1000 contacts walks the audience by contact id (keyset), drops
unsubscribed contacts and suppressed addresses with an anti-join, and INSERTs ... SELECTs the
message rows (idempotency key `c:<campaign>:<contact>`, ON CONFLICT DO NOTHING). The same
transaction advances the campaign's `fanout_cursor`; after the commit the new QUEUED ids are
published as batch tasks on the campaign's priority queue. No recipient passes through the ORM.

Restart safety: a fan-out killed half-way is redelivered (acks_late) or re-run by resume; it
starts from the cursor, and first re-publishes the unclaimed QUEUED rows its publishing had not
reached (campaigns/services/fanout_marks.py), covering a crash between a chunk's commit and its
publish (a second publish is harmless: the claim fences it); a resume re-publishes them all. A
session advisory lock keeps two copies of one campaign's fan-out from running at once.

A big audience (NOTIFIER_FANOUT_PARALLEL_MIN contacts or more) is split into disjoint contact-id
ranges written at once by NOTIFIER_FANOUT_CONNECTIONS threads, each with its own connection and
its own cursor in `Campaign.fanout_ranges` (one INSERT uses one PostgreSQL backend: decision 58).

Its modules: `runner` (a run, start to finish), `statements` (the SQL), `ranges` (how the
audience is cut into ranges and re-publish windows), `publisher` (publishing chunks, the marks),
`republish` (publishing unclaimed rows again), `lock` (one fan-out per campaign), `report`.
Callers import the package: the names they use are re-exported here.
"""

from campaigns.services.fanout.lock import LOCK_NAMESPACE, campaign_lock, campaign_unlock
from campaigns.services.fanout.ranges import NO_UPPER
from campaigns.services.fanout.report import FanoutReport
from campaigns.services.fanout.republish import REPUBLISH_CHUNK, campaign_unclaimed_republish
from campaigns.services.fanout.runner import campaign_fanout
from campaigns.services.fanout.statements import (
    CHUNK_SIZE,
    CONTEXT_EXPR,
    MESSAGE_TABLE,
    SUPPRESSION_TABLE,
    ChunkStatement,
    chunk_statement,
)

__all__ = [
    "CHUNK_SIZE",
    "CONTEXT_EXPR",
    "LOCK_NAMESPACE",
    "MESSAGE_TABLE",
    "NO_UPPER",
    "REPUBLISH_CHUNK",
    "SUPPRESSION_TABLE",
    "ChunkStatement",
    "FanoutReport",
    "campaign_fanout",
    "campaign_lock",
    "campaign_unclaimed_republish",
    "campaign_unlock",
    "chunk_statement",
]
