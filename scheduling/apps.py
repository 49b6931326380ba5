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

        # A cancelled schedule's inline addresses after its service's broadcast retention
        # (decision 132): after the campaigns' audiences (50), so the expire_data line keeps
        # its order; it depends on no other step's rows and costs one index probe a sweep.
        from clients.personal_data import register_personal_data_step
        from scheduling.personal_data import schedule_definitions_personal_data_step

        register_personal_data_step("schedule_definitions", schedule_definitions_personal_data_step, order=60)
