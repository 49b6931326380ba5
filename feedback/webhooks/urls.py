from django.urls import path

from feedback.webhooks.views import mailgun_webhook, sendgrid_webhook, ses_webhook

urlpatterns = [
    path("webhooks/ses/", ses_webhook, name="webhook-ses"),
    path("webhooks/sendgrid/", sendgrid_webhook, name="webhook-sendgrid"),
    path("webhooks/mailgun/", mailgun_webhook, name="webhook-mailgun"),
]
