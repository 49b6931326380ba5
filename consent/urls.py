"""The recipient's pages (included from notifier/urls.py): one-click unsubscribe, preferences."""

from django.urls import path

from consent import views

urlpatterns = [
    path("u/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("p/<str:token>/", views.preferences, name="preferences"),
]
