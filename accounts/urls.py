from django.urls import path

from accounts import views

app_name = "accounts"

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<str:key_id>/revoke/", views.revoke, name="revoke_token"),
]
