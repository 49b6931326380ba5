"""/metrics for Prometheus, collected from PostgreSQL and the broker at scrape time.

A custom collector (prometheus-client) rather than in-process counters: web, workers and the
scheduler are separate processes, and the database already holds the facts, so every process
answers the same numbers without prometheus multiprocess mode. Results are cached for a few
seconds per process so several scrapers cannot multiply the load.

    notifier_queue_pending_messages{priority}        QUEUED rows
    notifier_queue_broker_tasks{priority}            LLEN of the Celery queue (batches)
    notifier_queue_oldest_age_seconds{priority}      age of the oldest QUEUED row
    notifier_provider_attempts_total{provider,outcome}   provider calls by outcome
    notifier_provider_call_seconds{priority}         histogram of provider call durations
    notifier_webhook_events_total{provider,type}     stored (deduplicated) webhook events
    notifier_provider_fault{provider}                1 while a provider answers every message
                                                     with the same permanent error (alert on it)
    notifier_callback_endpoints{state}               status callback endpoints: enabled, failing
                                                     (retrying now), disabled_failing (alert on it)

Access (docs/decisions.md 47): with NOTIFIER_METRICS_TOKEN set, only `Authorization: Bearer
<token>` is answered, anything else is a 401; unset, only loopback peers are (`make run`, a
Prometheus on the same host), the rest a 401 that says to set the token.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from analytics.selectors.queues import priority_queues
from callbacks.selectors import callbacks_summary
from core.priorities import Priority
from delivery.models import DeliveryAttempt, EmailMessage
from delivery.providers import provider_order
from delivery.selectors import circuit_breaker_get
from delivery.services.sandbox import SANDBOX_PROVIDER
from feedback.models import EmailEvent

LATENCY_BUCKETS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
CACHE_SECONDS = 5.0


def _latency_histograms() -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "notifier_provider_call_seconds", "Provider call duration per priority", labels=["priority"]
    )
    cases = ", ".join(f"SUM(CASE WHEN a.duration_ms <= {b} THEN 1 ELSE 0 END)" for b in LATENCY_BUCKETS_MS)
    sql = (
        f"SELECT m.priority, COUNT(*), COALESCE(SUM(a.duration_ms), 0), {cases} "
        f"FROM {DeliveryAttempt._meta.db_table} a JOIN {EmailMessage._meta.db_table} m "
        f"ON m.id = a.message_id WHERE a.provider <> '{SANDBOX_PROVIDER}' GROUP BY m.priority"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    for priority, count, total_ms, *cumulative in rows:
        buckets = [(str(b / 1000), int(n or 0)) for b, n in zip(LATENCY_BUCKETS_MS, cumulative, strict=True)]
        buckets.append(("+Inf", int(count)))
        family.add_metric([Priority(priority).label], buckets, float(total_ms) / 1000)
    return family


def _queue_families() -> list[Metric]:
    pending = GaugeMetricFamily("notifier_queue_pending_messages", "QUEUED messages", labels=["priority"])
    tasks = GaugeMetricFamily("notifier_queue_broker_tasks", "Tasks in the broker queue", labels=["priority"])
    oldest = GaugeMetricFamily(
        "notifier_queue_oldest_age_seconds", "Age of the oldest QUEUED message", labels=["priority"]
    )
    for queue in priority_queues():
        pending.add_metric([queue["priority"]], queue["pending"])
        if queue["broker_tasks"] is not None:
            tasks.add_metric([queue["priority"]], queue["broker_tasks"])
        oldest.add_metric([queue["priority"]], queue["oldest_age_seconds"] or 0.0)
    return [pending, tasks, oldest]


def _provider_family() -> CounterMetricFamily:
    family = CounterMetricFamily(
        "notifier_provider_attempts", "Provider calls by outcome", labels=["provider", "outcome"]
    )
    rows = DeliveryAttempt.objects.values_list("provider", "outcome").annotate(n=Count("id"))
    for provider, outcome, n in rows:
        family.add_metric([provider, outcome], n)
    return family


def _webhook_family() -> CounterMetricFamily:
    family = CounterMetricFamily(
        "notifier_webhook_events", "Stored webhook events by type", labels=["provider", "type"]
    )
    for provider, event_type, n in EmailEvent.objects.values_list("provider", "event_type").annotate(
        n=Count("id")
    ):
        family.add_metric([provider, event_type], n)
    return family


def _fault_family() -> GaugeMetricFamily:
    """From Redis (delivery/services/provider_faults.py): the database only shows its effects."""
    family = GaugeMetricFamily(
        "notifier_provider_fault", "1 while the provider refuses everyone the same way", labels=["provider"]
    )
    for name in provider_order():
        family.add_metric([name], 1.0 if circuit_breaker_get(name).fault else 0.0)
    return family


def _callbacks_family() -> GaugeMetricFamily:
    summary = callbacks_summary()
    family = GaugeMetricFamily("notifier_callback_endpoints", "Status callback endpoints by state",
                               labels=["state"])
    family.add_metric(["enabled"], float(summary["endpoints"] - summary["disabled_count"]))
    family.add_metric(["failing"], float(summary["failing_count"]))
    family.add_metric(["disabled_failing"], float(summary["disabled_count"]))
    return family


class NotifierCollector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] > CACHE_SECONDS:
                families = [*_queue_families(), _provider_family(), _latency_histograms(), _webhook_family(),
                            _fault_family(), _callbacks_family()]
                self._cached = (time.monotonic(), families)
            return list(self._cached[1])

    def clear(self) -> None:
        with self._lock:
            self._cached = None


COLLECTOR = NotifierCollector()
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(COLLECTOR)


def metrics_cache_clear() -> None:
    """Forget the cached scrape (tests: the next scrape reads the current state)."""
    COLLECTOR.clear()


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def scrape_allowed(request: HttpRequest) -> bool:
    """The bearer token when one is configured; without one, loopback peers only."""
    token = settings.NOTIFIER_METRICS_TOKEN
    if not token:
        return _is_loopback(request.META.get("REMOTE_ADDR", ""))
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Constant-time: the comparison must not tell a prober how much of the token it got right.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not scrape_allowed(request):
        reason = "bearer token required" if settings.NOTIFIER_METRICS_TOKEN else (
            "set NOTIFIER_METRICS_TOKEN to scrape /metrics from another host")
        response = HttpResponse(reason + "\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
