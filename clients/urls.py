from django.urls import path

from clients.api import (
    KeyDetailApi,
    KeyListCreateApi,
    ServiceApi,
    TeamMemberDetailApi,
    TeamMemberListCreateApi,
)

urlpatterns = [
    path("api/v1/service", ServiceApi.as_view(), name="service"),
    path("api/v1/keys", KeyListCreateApi.as_view(), name="key-list"),
    path("api/v1/keys/<str:key_id>", KeyDetailApi.as_view(), name="key-detail"),
    path("api/v1/team-members", TeamMemberListCreateApi.as_view(), name="team-member-list"),
    path("api/v1/team-members/<id:member_id>", TeamMemberDetailApi.as_view(),
         name="team-member-detail"),
]
