from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        from eventlog.expiry import expiry_sweep
        from scheduling.extensions import register_sweep

        # The event log's expiry runs in the scheduler's sweep thread, beside campaign recovery
        # (decision 115): one lock holder, bounded steps.
        register_sweep(expiry_sweep)
