from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        from clients.personal_data import personal_data_sweep
        from eventlog.expiry import expiry_sweep
        from scheduling.extensions import register_sweep

        # The event log's expiry and personal-data removal run in the scheduler's sweep thread,
        # beside campaign recovery (decisions 115, 120): one lock holder, bounded steps.
        register_sweep(expiry_sweep)
        register_sweep(personal_data_sweep)
