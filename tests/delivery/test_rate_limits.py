"""Token buckets in real Redis: provider and domain limits, P0 reserve, 429 shrink, overrides."""

from __future__ import annotations

import threading
import time

import pytest

from core.lua import script
from core.redis_client import redis_key
from delivery.models import RateLimit
from delivery.providers.base import OutgoingEmail
from delivery.services import rate_limits
from delivery.services.rate_limits import emails_admit, limits_cache_clear, parse_limits

pytestmark = pytest.mark.django_db


def _emails(n: int, *, domain: str = "example.com", priority: int = 2, start: int = 0):
    return [OutgoingEmail(start + i, f"u{start + i}@{domain}", "f@example.org", "s", "t", "h",
                          priority=priority) for i in range(n)]


@pytest.fixture(autouse=True)
def no_inline_wait(settings):
    settings.NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS = 0


def test_parse_limits():
    assert parse_limits("ses=14, gmail.com=50:10") == {
        "ses": rate_limits.Limit(14.0, 3), "gmail.com": rate_limits.Limit(50.0, 10)}


def test_no_limits_admits_everything_without_redis(settings):
    emails = _emails(5)
    assert emails_admit("ses", emails) == (emails, 0.0)


def test_provider_bucket_caps_a_burst_and_says_how_long_to_wait(settings):
    settings.NOTIFIER_PROVIDER_RATE_LIMITS = "ses=10:5"
    admitted, wait = emails_admit("ses", _emails(8, priority=0))
    assert len(admitted) == 5
    assert 0.05 <= wait <= 0.15  # one token at 10/s
    admitted, _ = emails_admit("sendgrid", _emails(8))  # other providers unaffected
    assert len(admitted) == 8


def test_inline_wait_lets_a_batch_through_at_the_rate(settings):
    settings.NOTIFIER_PROVIDER_RATE_LIMITS = "ses=50:5"
    settings.NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS = 2
    started = time.monotonic()
    admitted, wait = emails_admit("ses", _emails(30, priority=0))
    elapsed = time.monotonic() - started
    assert (len(admitted), wait) == (30, 0.0)
    assert 0.4 <= elapsed <= 1.2  # 25 tokens beyond the burst at 50/s = 0.5 s


def test_bulk_leaves_a_reserve_for_p0(settings):
    settings.NOTIFIER_PROVIDER_RATE_LIMITS = "ses=1:10"
    settings.NOTIFIER_RATE_LIMIT_P0_RESERVE = 0.3
    bulk, _ = emails_admit("ses", _emails(10, priority=3))
    assert len(bulk) == 7
    critical, _ = emails_admit("ses", _emails(10, priority=0, start=100))
    assert len(critical) == 3


def test_domain_bucket_holds_only_that_domain(settings):
    settings.NOTIFIER_DOMAIN_RATE_LIMITS = "gmail.com=1:2"
    mixed = _emails(4, domain="gmail.com") + _emails(4, domain="example.com", start=10)
    admitted, wait = emails_admit("ses", mixed)
    assert sorted(e.recipient.split("@")[1] for e in admitted) == ["example.com"] * 4 + ["gmail.com"] * 2
    assert wait > 0.5


def test_429_halves_the_provider_rate_for_a_while(settings):
    settings.NOTIFIER_PROVIDER_RATE_LIMITS = "ses=100:10"
    settings.NOTIFIER_RATE_LIMIT_SHRINK_SECONDS = 0.5
    assert rate_limits._provider_args("ses", rate_limits.Limit(100, 10), _emails(1))[0] == 100
    rate_limits.provider_throttled(provider="ses")
    rate_limits.provider_throttled(provider="ses")
    assert rate_limits._provider_args("ses", rate_limits.Limit(100, 10), _emails(1))[0] == 25
    time.sleep(0.6)
    assert rate_limits._provider_args("ses", rate_limits.Limit(100, 10), _emails(1))[0] == 100


def test_admin_row_overrides_settings_after_the_cache(settings):
    settings.NOTIFIER_PROVIDER_RATE_LIMITS = "ses=1000:1000"
    settings.NOTIFIER_RATE_LIMIT_CACHE_SECONDS = 60
    assert len(emails_admit("ses", _emails(5))[0]) == 5
    RateLimit.objects.create(scope="provider", name="ses", per_second=1, burst=2)
    assert len(emails_admit("ses", _emails(5))[0]) == 5  # still cached
    limits_cache_clear()
    assert len(emails_admit("ses", _emails(5, priority=0))[0]) == 2


@pytest.mark.parametrize("limit", ["NOTIFIER_PROVIDER_RATE_LIMITS=ses",
                                   "NOTIFIER_DOMAIN_RATE_LIMITS=gmail.com"])
def test_two_callers_share_the_bucket_at_its_full_rate(settings, limit):
    """The shared bucket neither over-grants nor starves concurrent callers: two threads (as two
    workers would) taking batches for 2 s get the rate between them, the burst on top.

    The worker-process tests (test_delivery_faults) check the rate is never exceeded end to end;
    their throughput below the limit also depends on the machine, so the lower bound lives here,
    where callers only sleep and call Redis."""
    setting, name = limit.split("=")
    setattr(settings, setting, f"{name}=50:5")
    settings.NOTIFIER_RATE_LIMIT_INLINE_WAIT_SECONDS = 0.5
    settings.NOTIFIER_RATE_LIMIT_CACHE_SECONDS = 60
    rate_limits.limits_current()  # read here: the threads then never open a database session
    started = time.monotonic()
    admitted: list[int] = []
    ended: list[float] = []

    def take(offset: int) -> None:
        count = 0
        while time.monotonic() < started + 2.0:
            granted, _ = emails_admit("ses", _emails(10, domain="gmail.com", start=offset + count))
            count += len(granted)
        admitted.append(count)
        ended.append(time.monotonic())

    threads = [threading.Thread(target=take, args=(n * 10_000,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    elapsed = max(ended) - started
    assert len(admitted) == 2 and min(admitted) > 0, admitted  # both callers were served
    # The burst on top, and a token for the callers' whole-millisecond stamps.
    assert 0.85 * 50 * elapsed <= sum(admitted) <= 50 * elapsed + 5 + 1, (admitted, elapsed)


def test_a_call_stamped_earlier_but_run_later_refills_nothing_twice():
    """Callers stamp `now` with their own clock, so calls reach Redis out of stamp order; the
    bucket keeps its latest time, or the late call's older stamp would refill the same
    milliseconds again for the next caller."""
    key = redis_key("ratelimit", "provider", "ses")
    take = script("token_bucket")

    def granted(now_ms: int, wanted: int) -> int:  # provider 50/s, burst 5, no P0 reserve
        return int(take(keys=[key], args=[now_ms, wanted, 50, 5, 0])[1])

    assert granted(1_000, 10) == 5  # the burst
    assert granted(1_100, 10) == 5  # 100 ms at 50/s
    assert granted(1_050, 10) == 0  # stamped before the last call: nothing to refill
    assert granted(1_100, 10) == 0  # no time has passed since 1,100
    assert granted(1_120, 10) == 1
