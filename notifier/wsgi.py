"""WSGI entry point (gunicorn notifier.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "notifier.settings")
application = get_wsgi_application()
