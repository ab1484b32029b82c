"""OAuth routes for MCP hosts, in django-oauth-toolkit's URL namespace (its views reverse these
names): the two well-known metadata documents at the root, the endpoints under ``/oauth/``.
DOT's other views (application management pages, device flow, OIDC, introspection) are not
mounted."""

from django.urls import path

from accounts import oauth_views

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        oauth_views.server_metadata,
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        oauth_views.resource_metadata,
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/api/mcp",
        oauth_views.resource_metadata,
        name="oauth-resource-metadata-mcp",
    ),
    path("oauth/authorize/", oauth_views.ConsentView.as_view(), name="authorize"),
    path("oauth/token/", oauth_views.token, name="token"),
    path("oauth/revoke_token/", oauth_views.revoke_token, name="revoke-token"),
    path("oauth/register/", oauth_views.register, name="dcr-register"),
    # RFC 7592: a registered client reads, updates or deletes its own registration with the
    # registration access token it was given (no session, no workspace object).
    path(
        "oauth/register/<str:client_id>/",
        oauth_views.register_management,
        name="dcr-register-management",
    ),
]
