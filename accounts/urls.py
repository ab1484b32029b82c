from django.urls import path

from accounts import invitations, views

app_name = "accounts"

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<str:key_id>/revoke/", views.revoke, name="revoke_token"),
    path("tokens/oauth/<int:oauth_token_id>/revoke/", views.revoke_oauth, name="revoke_oauth_token"),
    path("invitations/", invitations.invitations, name="invitations"),
    path("invitations/<int:invitation_id>/accept/", invitations.accept, name="accept_invitation"),
    path("invitations/<int:invitation_id>/decline/", invitations.decline, name="decline_invitation"),
]
