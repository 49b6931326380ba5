FROM python:3.11-slim
WORKDIR /app
# The runtime set only; tests, lint, benchmarks and the `make run` launcher are in
# requirements-dev.txt.
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
CMD ["gunicorn", "notifier.wsgi", "--bind", "0.0.0.0:8000"]
