"""OAuth2 clients in the admin (OAUTH2_PROVIDER["APPLICATION_ADMIN_CLASS"], so the toolkit
registers this class for its swapped application model): each belongs to a service, with
scopes from the service's; the secret is shown once on creation; deleting one revokes it and
its tokens (every web process within NOTIFIER_API_KEY_CACHE_SECONDS)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from oauth2_provider.generators import generate_client_secret

from clients.admin_columns import ScopeListMixin
from clients.oauth_models import OAuthClient
from clients.scopes import Scope, default_scopes
from clients.services import KeyRefusedError, scopes_within_service


class OAuthClientForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple,
                                       initial=default_scopes)

    class Meta:
        model = OAuthClient
        fields = ["service", "name", "scopes"]

    def clean(self) -> dict:
        cleaned = super().clean()
        service = cleaned.get("service")
        if service is not None:
            try:
                scopes_within_service(service, cleaned.get("scopes"))
            except KeyRefusedError as exc:
                self.add_error(exc.field, str(exc))
        return cleaned


class OAuthClientAdmin(ScopeListMixin, admin.ModelAdmin):
    form = OAuthClientForm
    list_display = ["client_id", "name", "service", "scope_list", "created", "created_by"]
    list_select_related = ["service"]
    search_fields = ["client_id", "name", "service__name"]
    autocomplete_fields = ["service"]
    readonly_fields = ["client_id", "created", "created_by"]

    def save_model(self, request: HttpRequest, obj: OAuthClient, form: object = None,
                   change: bool = False) -> None:
        if change:
            obj.save()
            return
        obj.created_by = f"admin:{request.user.get_username()}"
        secret = generate_client_secret()
        obj.client_secret = secret
        obj.save()  # hashed on save
        self.message_user(request, f"New OAuth client {obj.name}: client_id {obj.client_id} "
                                   f"client_secret {secret} (store it somewhere safe: it is not "
                                   "shown again).", messages.WARNING)
