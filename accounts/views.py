"""Token management pages (owners only): list, create (the secret is shown once), revoke; the OAuth
tokens people granted to MCP hosts in this workspace are listed and revoked here too."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.forms import TokenForm
from accounts.models import ApiToken
from accounts.oauth import list_oauth_tokens, revoke_oauth_token
from accounts.tokens import TokenError, create_token, revoke_token, tokens_page
from runs.actions.permissions import Action
from runs.selectors.keyset import BadCursor
from runs.web.request import require_action


def _page(
    request: HttpRequest, membership, form: TokenForm, *, issued=None, status: int = 200, cursor: str = ""
) -> HttpResponse:
    workspace = membership.workspace
    tokens, next_cursor = tokens_page(workspace, cursor=cursor)  # BadCursor: the GET answers 400
    context = {
        "workspace": workspace,
        "tokens": tokens,
        "cursor": cursor,
        "next_cursor": next_cursor,
        "oauth_tokens": list_oauth_tokens(workspace),
        "form": form,
        "issued": issued,
        "nav_active": "tokens",
    }
    response = render(request, "accounts/tokens.html", context, status=status)
    if issued is not None:
        response["Cache-Control"] = "no-store"  # the page shows a secret
    return response


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    membership = require_action(request, Action.MANAGE_TOKENS)
    if request.method == "GET":
        try:
            return _page(request, membership, TokenForm(), cursor=request.GET.get("cursor", ""))
        except BadCursor:
            return HttpResponseBadRequest("bad cursor")
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, membership, form, status=400)
    try:
        issued = create_token(
            workspace=membership.workspace,
            name=form.cleaned_data["name"],
            scopes=form.cleaned_data["scopes"],
            created_by=request.user,
            expires_in=form.expires_in(),
        )
    except TokenError as exc:
        form.add_error(None, str(exc))
        return _page(request, membership, form, status=400)
    return _page(request, membership, TokenForm(), issued=issued, status=201)


@login_required
@require_POST
def revoke(request: HttpRequest, key_id: str) -> HttpResponse:
    membership = require_action(request, Action.MANAGE_TOKENS)
    try:
        token = revoke_token(workspace=membership.workspace, key_id=key_id)
    except ApiToken.DoesNotExist:
        raise Http404("no such token") from None
    messages.success(request, f"Token “{token.name}” ({token.key_id}) is revoked.")
    return redirect("accounts:tokens")


@login_required
@require_POST
def revoke_oauth(request: HttpRequest, oauth_token_id: int) -> HttpResponse:
    """Revoke an OAuth token of this workspace (and its refresh token): the host must sign in again."""
    membership = require_action(request, Action.MANAGE_TOKENS)
    try:
        row = revoke_oauth_token(workspace=membership.workspace, token_pk=oauth_token_id)
    except LookupError:
        raise Http404("no such token") from None
    messages.success(request, f"OAuth access of “{row.client_name}” for {row.username} is revoked.")
    return redirect("accounts:tokens")
