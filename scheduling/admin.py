"""Admin for schedules: actions are one-liners over the services the API uses. The beat task
of a recurring schedule also shows under "Periodic tasks" (django-celery-beat)."""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from scheduling.models import Schedule
from scheduling.services.recurring import schedule_cancel, schedule_pause, schedule_resume


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "type", "cron", "timezone", "status", "next_run", "last_run", "runs"]
    list_filter = ["type", "status"]
    search_fields = ["name"]
    # Only the name is edited in the form. The rest belongs to the services: a status set here
    # would skip them (a cancel leaving its beat task and no `cancelled_at`, a resume no
    # next_run), and a cron or time zone changed here would not reach the beat task. Status
    # moves through the actions below; a schedule is made (and remade) through the API.
    readonly_fields = ["client", "type", "cron", "timezone", "definition", "campaign", "status", "key_type",
                       "scheduled_at", "last_run", "next_run", "runs", "periodic_task", "created_at",
                       "updated_at", "cancelled_at", "personal_data_removed_at"]
    actions = ["pause", "resume", "cancel"]

    def has_add_permission(self, request) -> bool:
        return False  # a schedule made here would have no beat task: POST /api/v1/schedules

    @admin.action(description="Pause selected schedules")
    def pause(self, request, queryset) -> None:
        for schedule in queryset:
            schedule_pause(schedule=schedule)

    @admin.action(description="Resume selected schedules")
    def resume(self, request, queryset) -> None:
        for schedule in queryset:
            schedule_resume(schedule=schedule, now=timezone.now())

    @admin.action(description="Cancel selected schedules")
    def cancel(self, request, queryset) -> None:
        for schedule in queryset:
            schedule_cancel(schedule=schedule)
