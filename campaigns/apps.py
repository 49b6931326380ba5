from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"

    def ready(self) -> None:
        """Plug the campaign rules into the send path (delivery/extensions.py)."""
        from campaigns.claim_guard import CAMPAIGN_CLAIM_GUARD, CAMPAIGN_OPEN_GUARD
        from campaigns.services.unsubscribe import campaign_headers
        from delivery import extensions

        extensions.register_claim_guard(CAMPAIGN_CLAIM_GUARD)
        extensions.register_requeue_guard(CAMPAIGN_OPEN_GUARD)
        extensions.register_header_provider(campaign_headers)
