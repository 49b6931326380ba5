from django.urls import path

from callbacks import api

urlpatterns = [
    path("api/v1/webhooks", api.WebhookListApi.as_view(), name="webhook-list"),
    path("api/v1/webhooks/<id:webhook_id>", api.WebhookDetailApi.as_view(), name="webhook-detail"),
    path("api/v1/webhooks/<id:webhook_id>/rotate-secret", api.WebhookRotateSecretApi.as_view(),
         name="webhook-rotate-secret"),
    path("api/v1/webhooks/<id:webhook_id>/deliveries", api.WebhookDeliveryListApi.as_view(),
         name="webhook-deliveries"),
    path("api/v1/webhooks/<id:webhook_id>/replay", api.WebhookReplayApi.as_view(), name="webhook-replay"),
]
