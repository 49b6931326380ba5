"""Every Redis Lua script of notifier lives in this package as a `<name>.lua` file.

`script(name)` returns a redis-py `Script` bound to the shared client: it is registered once per
process and called by SHA (EVALSHA, falling back to EVAL after a Redis restart flushed the
script cache). Keys a script touches are always passed as KEYS, built with
`core.redis_client.redis_key`, so the configured prefix isolates deployments and tests.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from redis.commands.core import Script

from core.redis_client import get_redis

_DIRECTORY = Path(__file__).resolve().parent


@cache
def script(name: str) -> Script:
    """The script in `core/lua/<name>.lua`, registered with the shared client."""
    source = (_DIRECTORY / f"{name}.lua").read_text()
    return get_redis().register_script(source)
