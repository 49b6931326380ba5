"""POST /oauth/token: the client credentials grant (RFC 6749 section 4.4), nothing else.

The toolkit's TokenView does the work (client authentication by HTTP Basic or the form body,
scopes, the token row); this one refuses every other grant first, so no other flow's code runs.
Answers are OAuth's own (RFC 6749 5.1 and 5.2: `{"error": "invalid_client"}` and so on), not the
API's error shape: OAuth client libraries read those.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.views import TokenView

GRANT_TYPE = "client_credentials"


def _oauth_error(error: str, description: str) -> JsonResponse:
    response = JsonResponse({"error": error, "error_description": description}, status=400)
    response["Cache-Control"] = "no-store"
    return response


class ClientCredentialsTokenView(TokenView):
    """CSRF-exempt like the toolkit's view: a machine posts it with its credentials."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        grant_type = request.POST.get("grant_type")
        if not grant_type:
            return _oauth_error("invalid_request", "Missing grant_type (send the form "
                                                   "grant_type=client_credentials).")
        if grant_type != GRANT_TYPE:
            return _oauth_error("unsupported_grant_type",
                                f"Only grant_type={GRANT_TYPE} is supported.")
        return super().post(request, *args, **kwargs)
