"""GET /api/v1/providers: failover order and each provider's circuit breaker (for the dashboard)."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.selectors import circuit_breakers_list


class ProviderListApi(APIView):
    required_scope = "analytics"
    class OutputSerializer(serializers.Serializer):
        provider = serializers.CharField()
        state = serializers.CharField()
        open_for_seconds = serializers.FloatField()
        recent_failures = serializers.IntegerField()
        transitions = serializers.ListField(child=serializers.CharField())
        fault = serializers.CharField(help_text="the same permanent error for everyone, while it lasts")

    def get(self, request: Request) -> Response:
        """Providers in failover order with their circuit-breaker state."""
        breakers = circuit_breakers_list()
        return Response({"providers": self.OutputSerializer(breakers, many=True).data})
