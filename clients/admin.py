from django.contrib import admin
from rest_framework_api_key.admin import APIKeyModelAdmin

from clients.models import ApiClient


@admin.register(ApiClient)
class ApiClientAdmin(APIKeyModelAdmin):
    list_display = [*APIKeyModelAdmin.list_display, "last_used_at"]
