FROM python:3.11-slim
WORKDIR /app
# The runtime set only; the `make run` launcher's few are in requirements-run.txt, tests, lint
# and benchmarks in requirements-dev.txt.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# Local state (mail sink files, the fallback secret key) outside the root-owned code. No
# collectstatic: WhiteNoise serves from the app directories (WHITENOISE_USE_FINDERS), which
# take precedence over STATIC_ROOT, so collected files would never be served.
ENV NOTIFIER_VAR_DIR=/var/lib/notifier
RUN useradd --system notifier && mkdir -p /var/lib/notifier && chown notifier /var/lib/notifier
USER notifier
EXPOSE 8000
# granian: HTTP is parsed in Rust on an event loop, so slow or idle connections hold no Python
# thread (docs/decisions.md 45); 4 blocking threads per worker run the WSGI app. A worker that
# has not stopped 10 s after SIGTERM is killed (granian waits forever by default).
CMD ["granian", "--interface", "wsgi", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", \
     "--blocking-threads", "4", "--no-ws", "--workers-kill-timeout", "10", "notifier.wsgi:application"]
