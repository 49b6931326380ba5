"""A batch's conversation with an SMTP server, journaled in Redis as it happens (decision 92).

An SMTP batch sends its messages one transaction after another on one connection. A worker
killed in the middle leaves every row of the batch handed over with no answer recorded
(answers are written when the batch returns): the messages before the kill were accepted, one
was in flight, the rest never left. Without a record of which is which, all were held
AMBIGUOUS, and an SMTP server sends no events to settle them. So the provider journals:

    O:<provider>                 the journal is open (written before the first message)
    S:<message id>               this message's transaction is about to start
    R:<message id>:<outcome>:<provider message id>   its answer

An answer is written with the next message's `S` in one RPUSHX (and the last one when the
batch ends): one plain command per message, not two scripts (the SMTP path's CPU per message
doubled with two scripts, docs/benchmarks.md). A kill between an answer and that call leaves
the answered message AMBIGUOUS, as a kill before a separate answer call did; the window is the
same few microseconds of bookkeeping after the server's reply.

The recovery closes the journal (renamed to `...:closed` and marked `X`, atomically with reading
it) before it decides: an
accepted message is SENT, a message with no `S` provably never left and goes back to the queue,
one started and unanswered stays AMBIGUOUS (delivery/services/stalled_sends.py). A worker that
is only stuck, not dead, finds the journal closed at its next `S` and stops: nothing the
recovery released is sent twice. A journal Redis lost (a restart) or never opened (Redis was
down) proves nothing, and the batch's rows are held AMBIGUOUS as before; an `S` that cannot be
written stops the batch (its rest is released, TRANSIENT), since a missing `S` would read as
"never left".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cache

from django.conf import settings
from redis.commands.core import Script
from redis.exceptions import RedisError

from core.redis_client import get_redis, redis_key
from delivery.providers.base import Outcome, SendResult

logger = logging.getLogger(__name__)

# The recovery closes a journal by renaming it (and reads it there): a worker's next append is
# an RPUSHX, one plain command that finds no list and writes nothing once it is closed (or lost
# with a Redis restart). Opening and closing are scripts, so a close that comes before the open
# keeps that worker from opening at all.
_OPEN = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
_CLOSE = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('RENAME', KEYS[1], KEYS[2]) end
redis.call('RPUSH', KEYS[2], 'X')
redis.call('EXPIRE', KEYS[2], ARGV[1])
return redis.call('LRANGE', KEYS[2], 0, -1)
"""


@cache
def _scripts() -> tuple[Script, Script]:
    """(open, close), run by EVALSHA (redis-py loads them again after a Redis restart)."""
    client = get_redis()
    return client.register_script(_OPEN), client.register_script(_CLOSE)


def _keys(token: str) -> list[str]:
    """[the open journal, the closed one]"""
    return [redis_key("delivery", "journal", token), redis_key("delivery", "journal", token, "closed")]


def _ttl_seconds() -> int:
    """Outlives the recovery's wait before it looks (NOTIFIER_AMBIGUOUS_AFTER_SECONDS)."""
    return max(3600, 4 * settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS)


class SendJournal:
    """The journal of one claim token, as the provider writes it (delivery/providers/base.py
    `Journal`)."""

    def __init__(self, token: str) -> None:
        self.keys = _keys(token)
        self.open = False
        self._answers: list[str] = []  # written with the next step

    def opened(self, provider: str) -> None:
        """Open before the first message; Redis down: unjournaled (the recovery then holds)."""
        try:
            self.open = bool(_scripts()[0](keys=self.keys, args=[f"O:{provider}", _ttl_seconds()]))
        except RedisError:
            logger.warning("send journal unavailable; this batch is not journaled", exc_info=True)
            self.open = False

    def starting(self, message_id: int) -> bool:
        """Record that this message's transaction starts; False: do not send it (the journal was
        closed by the recovery, lost, or cannot be written)."""
        if not self.open:
            return True  # unjournaled batch: the recovery holds all of it
        try:
            return self._append(f"S:{message_id}")
        except RedisError:
            logger.warning("send journal unwritable; stopping the batch", exc_info=True)
            return False

    def answered(self, result: SendResult) -> None:
        """The answer, for the recovery: written with the next `starting` or at `finished`."""
        if self.open:
            self._answers.append(f"R:{result.message_id}:{result.outcome.value}:{result.provider_message_id}")

    def finished(self) -> None:
        """The batch ends: write the answers not yet written; losing them only keeps those rows
        AMBIGUOUS."""
        if not (self.open and self._answers):
            return
        try:
            self._append()
        except RedisError:
            logger.warning("send journal: %d answers were not recorded", len(self._answers), exc_info=True)

    def _append(self, *entries: str) -> bool:
        """The pending answers and `entries` in one call; False if the journal is closed."""
        answers, self._answers = self._answers, []
        return bool(get_redis().rpushx(self.keys[0], *answers, *entries))


@dataclass
class JournalRead:
    """What a closed journal proves, per message id."""

    opened: bool = False
    started: set[int] = field(default_factory=set)
    answers: dict[int, tuple[Outcome, str]] = field(default_factory=dict)


def journal_close(token: str) -> JournalRead:
    """Close the token's journal (no `S` is accepted after this) and read it."""
    entries = _scripts()[1](keys=_keys(token), args=[_ttl_seconds()])
    read = JournalRead()
    for raw in entries:
        entry = raw.decode() if isinstance(raw, bytes) else raw
        kind, _, rest = entry.partition(":")
        if kind == "O":
            read.opened = True
        elif kind == "S":
            read.started.add(int(rest))
        elif kind == "R":
            message_id, outcome, provider_id = rest.split(":", 2)
            read.answers[int(message_id)] = (Outcome(outcome), provider_id)
    return read
