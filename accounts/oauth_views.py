"""The OAuth pages and endpoints MCP hosts use (django-oauth-toolkit views, narrowed).

* ``/.well-known/oauth-protected-resource`` (RFC 9728): /api/mcp is the protected resource, this
  server its authorization server. ``/.well-known/oauth-authorization-server`` (RFC 8414).
* ``/oauth/register/`` (RFC 7591, open as MCP hosts expect), ``/oauth/token/``,
  ``/oauth/revoke_token/``: counted per client address like the sign-in (429 with Retry-After).
* ``/oauth/authorize/``: the consent page. A signed-in person sees the client's name, picks one of
  their workspaces and the scopes to grant (within their role there); CSRF-protected like every
  form. The grant then names the workspace (accounts.oauth).
"""

from __future__ import annotations

import json
from functools import wraps
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_protect
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_application_model
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
    OAuthProtectedResourceMetadataView,
    OAuthServerMetadataView,
    RevokeTokenView,
    TokenView,
)

from accounts import ratelimit
from accounts.models import Scope
from accounts.oauth import OAUTH_SCOPES, plaintext_redirect_is_loopback, workspace_scope
from runs.actions.permissions import ROLE_SCOPES
from runs.models import Membership, Role

MCP_PATH = "/api/mcp"
SCOPE_LABELS = dict(Scope.choices)


def resource_url(request: HttpRequest) -> str:
    """The protected resource, as clients name it (RFC 8707 / RFC 9728): the MCP endpoint's URL."""
    site = (getattr(settings, "WORKBENCH_SITE_URL", "") or "").rstrip("/")
    return (site or request.build_absolute_uri("/").rstrip("/")) + MCP_PATH


def resource_metadata_url(request: HttpRequest) -> str:
    site = (getattr(settings, "WORKBENCH_SITE_URL", "") or "").rstrip("/")
    path = reverse("oauth2_provider:oauth-resource-metadata")
    return (site + path) if site else request.build_absolute_uri(path)


class ProtectedResourceMetadata(OAuthProtectedResourceMetadataView):
    """RFC 9728 for /api/mcp, at the root and at the path form (``.../oauth-protected-resource/api/mcp``)."""

    def get_resource(self, request):
        return resource_url(request)

    def get_scopes_supported(self):
        return list(OAUTH_SCOPES)

    def get_resource_name(self):
        return f"{settings.WORKBENCH_SITE_NAME} MCP"

    def get_resource_documentation(self):
        return "/llms.txt"


# --------------------------------------------------------------------------------------------
# Rate limits: the unauthenticated OAuth endpoints count per client address


def _throttled(view, bucket: str):
    @wraps(view)  # keeps the view's csrf_exempt (the OAuth endpoints take no cookies), sets __wrapped__
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method in ("POST", "PUT", "DELETE"):
            limit = int(getattr(settings, "WORKBENCH_OAUTH_REQUESTS_PER_ADDRESS", 60))
            address = request.META.get("REMOTE_ADDR") or "unknown"
            decision = ratelimit.hit(f"oauth-{bucket}:{address}", limit=limit) if limit > 0 else None
            if decision is not None and not decision.allowed:
                response = JsonResponse(
                    {"error": "slow_down", "error_description": f"too many {bucket} requests, retry later"},
                    status=429,
                )
                response["Retry-After"] = str(decision.retry_after)
                return response
        return view(request, *args, **kwargs)

    return wrapped


def _loopback_http_only(view):
    """Registration (RFC 7591) and its updates (RFC 7592) refuse a plain-http redirect URI that
    is not a loopback callback, when the client registers: the authorization endpoint refuses it
    anyway, and a client should learn that before a person is sent to a page that cannot end."""

    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method in ("POST", "PUT"):
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                body = None  # the library answers a body it cannot read
            uris = body.get("redirect_uris") if isinstance(body, dict) else None
            if isinstance(uris, list):
                refused = [u for u in uris if isinstance(u, str) and not plaintext_redirect_is_loopback(u)]
                if refused:
                    return JsonResponse(
                        {
                            "error": "invalid_redirect_uri",
                            "code": "INVALID_INPUT",
                            "error_description": (
                                f"{refused[0]} uses plain http on a host that is not loopback: "
                                "use https, or http://127.0.0.1, http://[::1] or http://localhost"
                            ),
                        },
                        status=400,
                    )
        return view(request, *args, **kwargs)

    wrapped.csrf_exempt = getattr(view, "csrf_exempt", False)
    wrapped.__wrapped__ = view
    return wrapped


token = _throttled(TokenView.as_view(), "token")
register = _throttled(_loopback_http_only(DynamicClientRegistrationView.as_view()), "register")
register_management = _throttled(
    _loopback_http_only(DynamicClientRegistrationManagementView.as_view()), "register"
)
revoke_token = _throttled(RevokeTokenView.as_view(), "revoke")
server_metadata = OAuthServerMetadataView.as_view()
resource_metadata = ProtectedResourceMetadata.as_view()


# --------------------------------------------------------------------------------------------
# Consent


class ConsentForm(AllowForm):
    workspace = forms.ChoiceField(label="Workspace")
    grant = forms.MultipleChoiceField(label="Scopes", widget=forms.CheckboxSelectMultiple, required=False)

    def __init__(self, *args, memberships: list[Membership], requested: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.memberships = {m.workspace.slug: m for m in memberships}
        self.fields["workspace"].choices = [
            (m.workspace.slug, f"{m.workspace.name} ({m.workspace.slug}, you are {m.role})")
            for m in memberships
        ]
        self.fields["grant"].choices = [(s, f"{s}: {SCOPE_LABELS[s]}") for s in requested]
        self.fields["grant"].initial = requested
        self.requested = requested

    def granted(self) -> tuple[Membership, list[str]]:
        """The chosen membership and scopes (checked against the person's role there)."""
        membership = self.memberships[self.cleaned_data["workspace"]]
        chosen = [s for s in OAUTH_SCOPES if s in self.cleaned_data.get("grant", [])]
        return membership, chosen


def _requested(scope_text: str) -> list[str]:
    wanted = set((scope_text or "").split())
    return [s for s in OAUTH_SCOPES if s in wanted]


@method_decorator(csrf_protect, name="dispatch")
class ConsentView(AuthorizationView):
    template_name = "accounts/oauth_consent.html"
    form_class = ConsentForm

    def dispatch(self, request, *args, **kwargs):
        # A NUL names no client, redirect or scope (and PostgreSQL cannot compare text holding
        # one): refused with a code before the library looks anything up.
        if any("\x00" in value for query in (request.GET, request.POST) for value in query.values()):
            return JsonResponse(
                {
                    "error": "invalid_request",
                    "code": "INVALID_INPUT",
                    "error_description": "NUL in a parameter",
                },
                status=400,
            )
        return super().dispatch(request, *args, **kwargs)

    def _memberships(self) -> list[Membership]:
        return list(
            Membership.objects.select_related("workspace")
            .filter(user=self.request.user)
            .order_by("workspace__name", "workspace__pk")
        )

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs()
        scope_text = self.request.POST.get("scope") if self.request.method == "POST" else None
        if scope_text is None:
            scope_text = " ".join(self.oauth2_data.get("scopes", []))
        kwargs["memberships"] = self._memberships()
        kwargs["requested"] = _requested(scope_text)
        return kwargs

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        if "application" not in context and form is not None:
            client_id = form.data.get("client_id") or form.initial.get("client_id")
            context["application"] = get_application_model().objects.filter(client_id=client_id).first()
        if form is not None and hasattr(form, "requested"):
            context["requested"] = [(s, SCOPE_LABELS[s]) for s in form.requested]
            context["role_scopes"] = {
                slug: sorted(ROLE_SCOPES[Role(m.role)] & set(OAUTH_SCOPES))
                for slug, m in form.memberships.items()
            }
        return context

    def form_valid(self, form):
        membership, chosen = form.granted()
        allow = form.cleaned_data.get("allow")
        if allow:
            allowed = ROLE_SCOPES[Role(membership.role)]
            beyond = [s for s in chosen if s not in allowed]
            if beyond:
                form.add_error(
                    "grant",
                    f"As {membership.role} of {membership.workspace.name} you cannot grant {', '.join(beyond)}.",
                )
                return self.form_invalid(form)
            if not chosen:
                form.add_error("grant", "Choose at least one scope, or cancel.")
                return self.form_invalid(form)
        # Only what was asked for, and always exactly one workspace: the one the person picked.
        chosen = [s for s in chosen if s in form.requested]
        form.cleaned_data["scope"] = " ".join([*chosen, workspace_scope(membership.workspace)])
        return super().form_valid(form)

    def form_invalid(self, form):
        return self.render_to_response(self.get_context_data(form=form), status=400)

    def render_to_response(self, context, **response_kwargs):
        """The consent page's CSP lets its form lead to the client's registered callback.

        Browsers apply ``form-action`` to the redirects that follow a form's submission, so the
        site-wide ``form-action 'self'`` blocked the answer's redirect to the client: a real
        browser could not finish the sign-in. The one origin added is the redirect URI the
        library validated against the client's registration (``oauth2_data``), and only here.
        """
        response = super().render_to_response(context, **response_kwargs)
        target = _callback_source(getattr(self, "oauth2_data", {}).get("redirect_uri"))
        if target is not None:
            policy = dict(settings.SECURE_CSP)
            policy["form-action"] = [*policy.get("form-action", []), target]
            response._csp_config = policy  # what django.views.decorators.csp.csp_override sets
        return response

    def create_authorization_response(self, request, scopes, credentials, allow):
        credentials = {**credentials, "workbench_consent": True}  # see WorkspaceOAuth2Validator
        return super().create_authorization_response(request, scopes, credentials, allow)


def _callback_source(redirect_uri: object) -> str | None:
    """The CSP source of a registered redirect URI: its origin, or ``scheme:`` for an app's own
    scheme (``cursor://callback``)."""
    if not isinstance(redirect_uri, str) or not redirect_uri:
        return None
    parts = urlsplit(redirect_uri)
    if not parts.scheme:
        return None
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}" if parts.netloc else None
    return f"{parts.scheme}:"
