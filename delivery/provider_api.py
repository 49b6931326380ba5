"""GET /api/v1/providers: failover order and each provider's circuit breaker (for the dashboard)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.selectors import circuit_breakers_list


class ProviderStateSerializer(serializers.Serializer):
    provider = serializers.CharField()
    state = serializers.CharField(help_text="closed | open | half_open | unknown (Redis unreachable)")
    open_for_seconds = serializers.FloatField()
    recent_failures = serializers.IntegerField()
    transitions = serializers.ListField(child=serializers.CharField())
    fault = serializers.CharField(allow_blank=True,
                                  help_text="the same permanent error for everyone, while it lasts")


class ProviderListSerializer(serializers.Serializer):
    providers = ProviderStateSerializer(many=True, help_text="In failover order.")


class ProviderListApi(APIView):
    required_scope = "analytics"

    @extend_schema(responses={200: ProviderListSerializer})
    def get(self, request: Request) -> Response:
        """Providers in failover order with their circuit-breaker state."""
        breakers = circuit_breakers_list()
        return Response({"providers": ProviderStateSerializer(breakers, many=True).data})
