from django.urls import path

import core.url_converters  # noqa: F401 - registers <id:...>
from analytics.dashboard.views import campaign_action, dashboard_data_view, dashboard_page

urlpatterns = [
    path("dashboard/", dashboard_page, name="dashboard"),
    path("dashboard/data.json", dashboard_data_view, name="dashboard-data"),
    path("dashboard/campaigns/<id:campaign_id>/<str:action>", campaign_action, name="dashboard-campaign"),
]
