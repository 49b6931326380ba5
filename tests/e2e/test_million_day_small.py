"""The million-email day scaled down (issue 8): a 20,000-recipient P2 campaign with P0/P1 streams
and scheduled P3 messages (two P0 pools), while workers are SIGKILLed every 10 s, the primary ESP refuses
connections for 15 s and the dedicated Redis restarts (the scheduler rebuilds its due set).

Everything is real: gunicorn, one Celery pool per priority, the scheduler, PostgreSQL, a Redis
server of its own, fake SendGrid and Postfix's smtp-sink with ledgers. Counts lost, duplicates
and cross-ESP duplicates over every message, and holds P0 to its 10 s SLA.
"""

from __future__ import annotations

import os

import pytest

from bench.cpu_weights import V1_ROOT, V2_ROOT, compose_shares, cpu_cgroups_writable
from bench.million_day import STAND_IN_SHARES, STAND_INS, Config, run
from bench.million_procs import COMPOSE_SERVICES
from bench.million_report import table
from testkit import processes
from testkit.ports import free_port

# solo: its P0 SLA is measured with the machine to itself (`make test` runs it after the rest).
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.solo]


# Half the day's own P0/P1 rates (20/s and 50/s, which bench/million_day.py keeps): on a CI host
# about twice as slow per request as the one the figures in docs/benchmarks.md come from, those
# two streams alone took ~1.5 of the 2 cores, the P1 queue and the campaign fell behind the 170 s
# bound and the run counted 1,148 rows "pending at stop". The faults, not the throughput, are
# what this test is for; the rates leave the slower host a core for the campaign.
P0_RATE, P1_RATE = 10, 25


@pytest.mark.parametrize("broker", ["redis", "amqp"])
def test_small_million_day_loses_nothing_and_keeps_the_p0_sla(broker, transactional_db, tmp_path):
    config = Config(
        recipients=20_000, p0_rate=P0_RATE, p1_rate=P1_RATE, scheduled=300,
        scheduled_first_due=10, scheduled_last_due=40, kill_interval=10,
        refuse_at=15, refuse_seconds=15, redis_restart_at=35, max_seconds=170, drain_seconds=30,
        warm_up_seconds=3,
        p0_pools=2, broker=broker, redis_port=free_port(), web_port=free_port(), smtp_port=free_port(),
        out=str(tmp_path / "million"),
    )
    result = run(config, processes.subprocess_env())
    print(table(result))  # the figures, with `pytest -s`
    delivery = result["delivery"]
    summary = {k: delivery[k] for k in ("lost", "duplicates", "cross_esp_duplicates", "pending_at_stop")}
    assert summary == {"lost": 0, "duplicates": 0, "cross_esp_duplicates": 0, "pending_at_stop": 0}, (
        delivery, result["faults"])
    assert delivery["unexpected_ids"] == 0
    # AMBIGUOUS rows at no ESP count as lost above: each was re-sent once its ESP's events covered
    # later sends (decision 89), or is an SMTP transaction in flight, held for an operator.
    assert not set(delivery["ambiguous"]["reconciled_delivered_once"]) & set(delivery["duplicate_ids_sample"])
    # Drained: no campaign row is left QUEUED or SENDING (AMBIGUOUS ones are held, counted above).
    assert result["stopped_because"] == "campaign drained", result["campaign"]
    assert result["latency"]["P0"]["n"] > 0 and result["latency"]["P0"]["max"] < 10, result["latency"]
    # The latency's split adds up: every stage measured for most P0 messages, none negative.
    stages = result["stages"]["P0"]
    assert min(stage["n"] for stage in stages.values()) > result["latency"]["P0"]["n"] // 2, stages
    assert all(stage["p50"] >= 0 for stage in stages.values()), stages
    assert result["api_error_count"] == 0, result["api_errors"]  # after retries of 503s
    # The warm-up's messages were sent before the launch and count in delivery (above), apart.
    assert result["api_sent"]["W0"] > 0 and result["api_sent"]["W1"] > 0, result["api_sent"]
    assert sum(w["over"] for w in result["tail_windows"]["P0"]) <= result["latency"]["P0"]["n"]
    with open(tmp_path / "million" / "messages.csv") as per_message:
        # Every P0 message has its line; the ones re-sent after their ESP's evidence (decision 89)
        # are in it but not in the latency, which holds the SLA's sends.
        resent_p0 = result["resent_after_evidence"]["streams"].get("P0", 0)
        p0_lines = sum(1 for line in per_message if line.startswith("P0,"))
    assert p0_lines == result["latency"]["P0"]["n"] + resent_p0
    assert {f["kind"] for f in result["faults"]} >= {"redis-down", "kill-child", "primary-refuse-15s"}
    # Where the host lets us make cpu cgroups (root: CI, this machine), every service ran in one
    # weighted as docker-compose.yml weighs it, and no group outlived the run.
    if cpu_cgroups_writable():
        assert result["machine"]["cpu_shares"]["web"] == compose_shares(COMPOSE_SERVICES)["web"]
        assert result["machine"]["cpu_shares"][STAND_INS] == STAND_IN_SHARES  # the ESP stand-ins
        ours = f"notifier-million-{os.getpid()}-*"  # run() names its groups after this process
        assert not list(V1_ROOT.glob(ours)) + list(V2_ROOT.glob(ours))
