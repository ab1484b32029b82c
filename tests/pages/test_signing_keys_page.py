"""Settings, Signing keys (issue 52): the keys that sign the workspace's exports (its own and the
instance's), the one that signs now, where verifiers find them; another workspace's keys are not
listed, and no private half is ever on the page."""

from __future__ import annotations

import re

import pytest

from runs.actions.signing import do_create_signing_key, do_rotate_signing_key
from runs.models import SigningKey

pytestmark = pytest.mark.django_db


def _rows(html: str) -> list[tuple[str, str, str]]:
    table = html.split("data-keys", 1)[1].split("</table>", 1)[0]
    return re.findall(
        r'<code class="key-id" title="([^"]+)">.*?</code></th>\s*<td>([^<]+)</td>\s*<td>(?:<span[^>]*>)?([^<]+)<',
        table,
        re.S,
    )


def test_the_page_lists_the_keys_that_sign_this_workspaces_exports(client, alice, workspace, other_workspace):
    instance = do_create_signing_key()
    client.force_login(alice)
    html = client.get("/settings/signing-keys/").content.decode()
    assert _rows(html) == [(instance.kid, "the instance", "signing")]
    assert "/.well-known/jwks.json" in html and 'aria-current="page">Signing keys<' in html
    # the workspace gets its own key, rotates it: the first is retired, the instance's not used
    first = do_create_signing_key(workspace=workspace)
    second = do_rotate_signing_key(workspace=workspace)
    theirs = do_create_signing_key(workspace=other_workspace)
    rows = _rows(client.get("/settings/signing-keys/").content.decode())
    assert (second.kid, "this workspace", "signing") in rows
    assert (first.kid, "this workspace", "retired") in rows
    assert (instance.kid, "the instance", "not used (the workspace has its own key)") in rows
    assert theirs.kid not in {kid for kid, _, _ in rows}
    assert len(rows) == SigningKey.objects.exclude(workspace=other_workspace).count() == 3


def test_visitors_are_sent_to_sign_in(client):
    response = client.get("/settings/signing-keys/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
