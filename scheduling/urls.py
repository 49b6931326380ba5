from django.urls import path

import core.url_converters  # noqa: F401 - registers <id:...>
from scheduling.api import (
    ScheduleCancelByKeyApi,
    ScheduleDetailApi,
    ScheduleListApi,
    SchedulePauseApi,
    ScheduleResumeApi,
)

urlpatterns = [
    path("api/v1/schedules", ScheduleListApi.as_view(), name="schedule-list"),
    path("api/v1/schedules/cancel", ScheduleCancelByKeyApi.as_view(), name="schedule-cancel-key"),
    path("api/v1/schedules/<id:schedule_id>", ScheduleDetailApi.as_view(), name="schedule-detail"),
    path("api/v1/schedules/<id:schedule_id>/pause", SchedulePauseApi.as_view(), name="schedule-pause"),
    path("api/v1/schedules/<id:schedule_id>/resume", ScheduleResumeApi.as_view(), name="schedule-resume"),
]
