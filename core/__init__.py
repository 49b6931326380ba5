"""The platform: neutral code every app builds on, importing none of them (nor `notifier`).

DRF plumbing (core.api), the shared Redis client and its key layout (core.redis_client), the
Lua scripts (core.lua), the queue and priority topology (core.priorities, core.broker_compat),
the worker entry point (core.worker), health, admin and command helpers. import-linter keeps it
at the bottom (pyproject.toml [tool.importlinter], docs/architecture.md "Layers").
"""
