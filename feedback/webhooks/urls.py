from django.urls import path

from delivery.providers import esps_with_webhooks
from feedback.webhooks.views import esp_webhook

# /webhooks/<esp>/ for every ESP in the registry that reports events (names: webhook-<esp>).
urlpatterns = [
    path(f"webhooks/{name}/", esp_webhook, {"esp": name}, name=f"webhook-{name}")
    for name in esps_with_webhooks()
]
