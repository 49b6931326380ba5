"""First-run and development launchers, never a production process's code path.

`python -m devtools.run` is `make run` (the whole system on embedded defaults); embedded.py
holds the embedded PostgreSQL and Redis the settings default to (and the test session starts);
`python -m devtools.smtp_sink` is the local mail sink (`make run`, compose's `mailsink`).
Configuration (notifier/) may import it; no domain app or core may (pyproject.toml
[tool.importlinter]).
"""
