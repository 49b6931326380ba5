from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "campaigns"

    def ready(self) -> None:
        """Plug the campaign rules into the send path (delivery/extensions.py), into the
        scheduling engine (scheduling/extensions.py) and into consent (consent/extensions.py)."""
        from campaigns.claim_guard import CAMPAIGN_CLAIM_GUARD, CAMPAIGN_OPEN_GUARD
        from delivery import extensions

        extensions.register_claim_guard(CAMPAIGN_CLAIM_GUARD)
        extensions.register_requeue_guard(CAMPAIGN_OPEN_GUARD)

        # A campaign link's one-click unsubscribe leaves the campaign's topic.
        from campaigns.selectors import campaign_topic
        from consent import extensions as consent

        consent.register_campaign_topic_reader(campaign_topic)

        # Campaign rows read their contact at send (decision 65): a deleted contact's go too.
        from django.db.models.signals import pre_delete

        from audience.models import Contact
        from campaigns.services.contacts import contact_deleted_rows_suppress

        pre_delete.connect(contact_deleted_rows_suppress, sender=Contact,
                           dispatch_uid="campaigns-contact-deleted")

        # A deleted campaign's minute tally of events goes with it (feedback keeps a plain id).
        from django.db.models.signals import post_delete

        from campaigns.models import Campaign
        from feedback.services.tally import campaign_tally_forget

        post_delete.connect(campaign_tally_forget, sender=Campaign, dispatch_uid="campaigns-tally-forget")

        # What a recurring schedule runs, what a cancelled one-off schedule stops, and the
        # recovery sweeps the scheduler's lock holder runs (scheduling/extensions.py).
        from campaigns.services.launch import campaign_definition_validate, campaign_launch_run
        from campaigns.services.lifecycle import campaign_cancel_if_open
        from campaigns.services.recovery import campaigns_recovery_sweep
        from campaigns.services.scheduled import campaigns_due_promote
        from scheduling import extensions as scheduling

        scheduling.register_run_launcher(campaign_launch_run)
        scheduling.register_definition_validator(campaign_definition_validate)
        scheduling.register_target_canceller(campaign_cancel_if_open)
        scheduling.register_sweep(campaigns_recovery_sweep)
        scheduling.register_due_listener(campaigns_due_promote)

        # The reputation guard's pause of a campaign whose bounce/complaint rate is too high.
        from campaigns.services.lifecycle import campaign_pause_for
        from feedback import extensions as feedback

        feedback.register_campaign_pauser(campaign_pause_for)

        # A scheduled campaign's rows keep their personal data until they are sent: the
        # service's retention may not be set shorter than their wait (decision 120).
        from campaigns.selectors import campaigns_pending_until
        from clients.retention import register_pending_horizon

        register_pending_horizon(campaigns_pending_until)

        # An ended inline campaign's addresses after its service's broadcast retention (decision
        # 130): last (order 50), after the messages (10) that hold the same addresses in far
        # more rows; it depends on no other step's rows, and costs one index probe a sweep when
        # nothing is due.
        from campaigns.personal_data import campaign_audiences_personal_data_step
        from clients.personal_data import register_personal_data_step

        register_personal_data_step("campaign_audiences", campaign_audiences_personal_data_step, order=50)
