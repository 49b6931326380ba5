FROM python:3.11-slim
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN useradd --system notifier && mkdir -p /var/lib/notifier && chown notifier /var/lib/notifier
USER notifier
EXPOSE 8000
CMD ["gunicorn", "notifier.wsgi", "--bind", "0.0.0.0:8000"]
