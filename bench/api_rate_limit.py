"""Cost of the per-client rate limit: Lua sliding-window checks per second against Redis, from
one process (each API request makes one such call).

    REDIS_URL=redis://127.0.0.1:6379/5 python bench/api_rate_limit.py [N]
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import harness

harness.django_setup()

from clients.rates import parse_rate  # noqa: E402
from clients.throttling import rate_limit_hit  # noqa: E402
from core.redis_client import get_redis, redis_key  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    rate = parse_rate("1000/min")  # the window holds up to 1000 entries, as a busy client would
    rate_limit_hit(bucket=prefix, endpoint_class="bench", rate=rate)
    started = time.perf_counter()
    allowed = sum(rate_limit_hit(bucket=prefix, endpoint_class="bench", rate=rate).allowed
                  for _ in range(n))
    elapsed = time.perf_counter() - started
    get_redis().delete(redis_key("throttle", prefix, "bench"))
    print(f"checks: {n}, allowed: {allowed + 1} (limit {rate.limit})")
    print(f"{n / elapsed:,.0f} checks/s, {elapsed / n * 1e6:.0f} us/check (one process)")


if __name__ == "__main__":
    main()
