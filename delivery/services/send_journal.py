"""A batch's conversation with an SMTP server, journaled in Redis as it happens (decision 92).

An SMTP batch sends its messages one transaction after another on one connection. A worker
killed in the middle leaves every row of the batch handed over with no answer recorded
(answers are written when the batch returns): the messages before the kill were accepted, one
was in flight, the rest never left. Without a record of which is which, all were held
AMBIGUOUS, and an SMTP server sends no events to settle them. So the provider journals:

    O:<provider>                 the journal is open (written before the first message)
    S:<message id>               this message's transaction is about to start
    R:<message id>:<outcome>:<provider message id>   its answer

The recovery closes the journal (`X`, atomically with reading it) before it decides: an
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

from django.conf import settings
from redis.exceptions import RedisError

from core.redis_client import get_redis, redis_key
from delivery.providers.base import Outcome, SendResult

logger = logging.getLogger(__name__)
CLOSED = "X"

# Each script checks and writes in one step, so a close and a start cannot interleave.
_OPEN = """
if redis.call('LINDEX', KEYS[1], -1) == 'X' then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""
_APPEND_IF_OPEN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('LINDEX', KEYS[1], -1) == 'X' then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""
_CLOSE = """
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('RPUSH', KEYS[1], 'X')
redis.call('EXPIRE', KEYS[1], ARGV[1])
return entries
"""


def _key(token: str) -> str:
    return redis_key("delivery", "journal", token)


def _ttl_seconds() -> int:
    """Outlives the recovery's wait before it looks (NOTIFIER_AMBIGUOUS_AFTER_SECONDS)."""
    return max(3600, 4 * settings.NOTIFIER_AMBIGUOUS_AFTER_SECONDS)


class SendJournal:
    """The journal of one claim token, as the provider writes it (delivery/providers/base.py
    `Journal`)."""

    def __init__(self, token: str) -> None:
        self.key = _key(token)
        self.open = False

    def opened(self, provider: str) -> None:
        """Open before the first message; Redis down: unjournaled (the recovery then holds)."""
        try:
            self.open = bool(get_redis().eval(_OPEN, 1, self.key, f"O:{provider}", _ttl_seconds()))
        except RedisError:
            logger.warning("send journal unavailable; this batch is not journaled", exc_info=True)
            self.open = False

    def starting(self, message_id: int) -> bool:
        """Record that this message's transaction starts; False: do not send it (the journal was
        closed by the recovery, lost, or cannot be written)."""
        if not self.open:
            return True  # unjournaled batch: the recovery holds all of it
        try:
            return bool(get_redis().eval(_APPEND_IF_OPEN, 1, self.key, f"S:{message_id}"))
        except RedisError:
            logger.warning("send journal unwritable; stopping the batch", exc_info=True)
            return False

    def answered(self, result: SendResult) -> None:
        """The answer, for the recovery; losing it only keeps the row AMBIGUOUS."""
        if not self.open:
            return
        entry = f"R:{result.message_id}:{result.outcome.value}:{result.provider_message_id}"
        try:
            get_redis().eval(_APPEND_IF_OPEN, 1, self.key, entry)
        except RedisError:
            logger.warning("send journal: an answer was not recorded", exc_info=True)


@dataclass
class JournalRead:
    """What a closed journal proves, per message id."""

    opened: bool = False
    started: set[int] = field(default_factory=set)
    answers: dict[int, tuple[Outcome, str]] = field(default_factory=dict)


def journal_close(token: str) -> JournalRead:
    """Close the token's journal (no `S` is accepted after this) and read it."""
    entries = get_redis().eval(_CLOSE, 1, _key(token), _ttl_seconds())
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
