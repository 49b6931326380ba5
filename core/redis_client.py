"""The one shared redis-py client, and the key layout of everything notifier keeps in Redis.

All keys live under one configurable prefix (`NOTIFIER_REDIS_PREFIX`, default `notifier`) and
are built with `redis_key(...)`, so tests and several deployments can share a server. This is
the one list of every key family the code writes (the owning module documents the details);
a new family is added here in the same commit (tests/test_docs_truth.py reads every
`redis_key(...)` call and fails on a family missing here, or listed here and built nowhere).

    API (clients)
    notifier:idem-http:<client prefix>:<sha256 of key>  string JSON {fp, status, body}: replayed
                                                        Idempotency-Key answers, TTL 24 h
                                                        (clients/idempotency.py)
    notifier:throttle:<client prefix>:<class>           ZSET of hits, score = microseconds: the
                                                        per-client API throttle (clients/throttling.py)
    Templates
    notifier:templates:generation                       integer, INCR on every template change:
                                                        each web process's cached current
                                                        versions (templates/services.py)
    Delivery
    notifier:ratelimit:provider:<name>                  hash tokens, ts: provider token bucket
    notifier:ratelimit:domain:<domain>                  hash tokens, ts: recipient-domain bucket
    notifier:ratelimit:shrink:<name>                    string factor after a 429, TTL = shrink
                                                        period (delivery/services/rate_limits.py)
    notifier:breaker:<provider>                         hash: circuit breaker state
    notifier:breaker:<provider>:events                  list: last 100 transitions
                                                        (delivery/services/circuit_breaker.py)
    notifier:fault:<provider>                           hash: the detected provider fault
    notifier:fault:<provider>:streak|recipients|messages|put_back
                                                        the same-error streak and the rows to
                                                        re-queue (delivery/services/provider_faults.py)
    notifier:delivery:batch_seen:<task id>              string, SET NX with TTL: the task id ran
                                                        once; a redelivery takes the claim-first
                                                        path (delivery/services/sending.py)
    notifier:delivery:journal:<claim token>             list, TTL >= 1 h: an SMTP batch's progress
                                                        (O, S:<id>, R:<id>:...; delivery/services/
                                                        send_journal.py)
    notifier:delivery:journal:<claim token>:closed      list, TTL >= 1 h: the same, renamed (+ X)
                                                        when the recovery closed it
    notifier:delivery:esp_lookup:slot:<provider>        string, SET NX with TTL: one ESP lookup call
                                                        per interval
    notifier:delivery:esp_lookup:off:<provider>         string reason, TTL 1 h: the account cannot
                                                        use the ESP's lookup
    notifier:delivery:esp_lookup:cursor:<provider>      string, the last message id looked up
                                                        (delivery/services/esp_lookup.py)
    Scheduling
    notifier:schedule:due                               ZSET score = due epoch, member = message id
    notifier:schedule:processing                        ZSET score = lease deadline (claimed)
    notifier:schedule:built                             string "done" or the last id a rebuild added;
                                                        missing: Redis lost the due set, the
                                                        scheduler rebuilds it (decision 96)
    notifier:schedule:lock                              string holder token, TTL: one active
                                                        dispatcher (scheduling/services/due.py, lock.py)
    Campaigns
    notifier:campaigns:progress:<campaign id>           string "<finished>:<epoch>", TTL 1 h
                                                        (campaigns/services/progress.py)
    notifier:campaigns:fanout_watch:<campaign id>       string "<cursor>:<epoch>", TTL 1 h
                                                        (campaigns/services/recovery.py)
    notifier:campaigns:fanout_published:<campaign id>   hash range index -> contact id, TTL 2 days:
                                                        how far each fan-out range's publishing
                                                        got (campaigns/services/fanout_marks.py)
    Analytics
    notifier:analytics:workers                          string JSON: cached `celery inspect`
                                                        (analytics/selectors/queues.py)
    notifier:analytics:<series>:<minute epoch>          string JSON {name: count}: a settled
                                                        minute of a live series (throughput:
                                                        sends per priority, events: webhook
                                                        events per type, provider_calls),
                                                        TTL window + 5 min
                                                        (analytics/selectors/kept_minutes.py)
    Live counts (any writer)
    notifier:live:<series>:<minute epoch>               hash {name: count}, HINCRBY after each
                                                        writer's commit: an open minute's counts
                                                        of the same series, TTL 5 min
                                                        (core/live_counts.py)
    Feedback
    notifier:feedback:webhook-task-scheduled            string, SET NX with TTL: one pending
                                                        webhook task (feedback/services/drain.py)
    notifier:feedback:reputation-check:<kind>:<id>      string, SET NX with TTL: throttles the
                                                        reputation check (feedback/services/reputation.py)
    notifier:webhooks:mailgun-token:<token>             string, SET NX with TTL: Mailgun replay
                                                        guard (delivery/providers/mailgun/webhook.py)

Not under the prefix: when Redis is the Celery broker, kombu's own keys (one list per queue,
`unacked`, `_kombu.binding.*`) in the broker's database.

    $ redis-cli --scan --pattern 'notifier:*'
"""

from __future__ import annotations

from functools import cache
from urllib.parse import parse_qsl, urlencode

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    """A process-wide client (redis-py pools connections; safe across threads)."""
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )


def redis_url_of_broker(broker_url: str) -> str | None:
    """The redis-py URL of a Redis Celery broker (None for another transport).

    kombu spells a unix socket `redis+socket:///path?virtual_host=N`; redis-py wants
    `unix:///path?db=N`.
    """
    if broker_url.startswith("redis+socket://"):
        path, _, query = broker_url.removeprefix("redis+socket://").partition("?")
        params = dict(parse_qsl(query))
        database = params.pop("virtual_host", params.pop("db", "0"))
        return f"unix://{path}?{urlencode({**params, 'db': database})}"
    if broker_url.startswith(("redis://", "rediss://", "unix://")):
        return broker_url
    return None


@cache
def broker_redis(broker_url: str, *, socket_timeout: float = 5.0) -> redis.Redis | None:
    """One client (and connection pool) per Redis broker URL and process, None for another
    transport (redis-py's pool is safe across threads and a fork)."""
    url = redis_url_of_broker(broker_url)
    if url is None:
        return None
    return redis.Redis.from_url(url, socket_timeout=socket_timeout,
                                socket_connect_timeout=min(socket_timeout, 2), health_check_interval=30)


def redis_key(*parts: str | int) -> str:
    """Build a key under the configured prefix: redis_key('schedule', 'due')."""
    return ":".join([settings.REDIS_KEY_PREFIX, *map(str, parts)])
