"""The operations dashboard: a server-rendered page that refreshes itself from a JSON endpoint.

Staff only (Django admin login). Campaign buttons POST (CSRF-protected) to one endpoint that
calls the campaign lifecycle service and answers as the API does: 200 with the campaign's new
status, 409 when its state refuses the action (already completed, cancelled by someone else),
404 for an unknown campaign; the page shows the answer.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from analytics.dashboard.selectors import dashboard_data
from campaigns.models import Campaign
from campaigns.services.lifecycle import LIFECYCLE_ACTIONS, IllegalTransitionError, campaign_lifecycle_apply


@require_GET
@staff_member_required
def dashboard_page(request: HttpRequest) -> HttpResponse:
    context = {"data": dashboard_data(), "flower_url": settings.FLOWER_URL}
    return render(request, "analytics/dashboard.html", context)


@require_GET
@staff_member_required
def dashboard_data_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(dashboard_data())


@require_POST
@staff_member_required
def campaign_action(request: HttpRequest, campaign_id: int, action: str) -> JsonResponse:
    if action not in LIFECYCLE_ACTIONS:
        allowed = f"one of {', '.join(LIFECYCLE_ACTIONS)}"
        return JsonResponse({"error": {"code": "invalid", "message": "unknown action",
                                       "fields": {"action": [allowed]}}}, status=400)
    reason = f"{action} by {request.user.get_username()} from the dashboard"
    try:
        campaign = campaign_lifecycle_apply(campaign_id=campaign_id, action=action, reason=reason)
    except IllegalTransitionError as exc:
        return _error(409, "conflict", str(exc), status=exc.campaign.status)
    except Campaign.DoesNotExist:
        return _error(404, "not_found", f"No campaign {campaign_id}.")
    return JsonResponse({"campaign": campaign_id, "action": action, "changed": True,
                         "status": campaign.status})


def _error(http_status: int, code: str, message: str, **extra: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}, **extra},
                        status=http_status)
