"""What both the tests and the benchmarks start: no test, no benchmark, no pytest.

- processes: real notifier processes (Celery workers, the scheduler, the Procfile's web server)
  as subprocesses with a log file each, and the environment they run with;
- fakes: fake ESP servers speaking SendGrid's, Mailgun's and SES's wire formats, with a ledger
  and injectable faults;
- smtp: a recording SMTP server (aiosmtpd) on 127.0.0.1;
- redis_server: a dedicated Redis (no persistence) to use as a broker and restart for real;
- webhook_signing: ESP webhook signers with throwaway keys;
- ports, waiting: a free port, a bounded wait for a condition.

The tests (tests/, with their pytest fixtures and hooks) and the benchmarks (bench/) import it;
it imports neither, and no product code imports it (pyproject.toml, `[tool.importlinter]`). The
production image carries it unused.
"""
