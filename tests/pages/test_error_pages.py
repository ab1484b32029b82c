"""Branded error pages (400, 403, the CSRF failure, 404) instead of Django's bare defaults: the
site's layout, a heading, what happened and where to go; nothing of the request echoed unescaped."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_csrf_failure_is_a_branded_page():
    answer = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x", "password": "y"})
    html = answer.content.decode()
    assert answer.status_code == 403 and '<html lang="en">' in html
    assert (
        "This form has expired" in html
        and "<title>Form expired" in html
        and 'href="/accounts/login/"' in html
    )


def test_permission_denied_is_a_branded_page(client, vera):
    client.force_login(vera)  # a viewer may not import bundles
    answer = client.post("/import/", {})
    html = answer.content.decode()
    assert answer.status_code == 403 and "You are not allowed to do this" in html
    assert "<nav" in html  # the site's navigation, signed in


def test_bad_request_is_a_branded_page():
    answer = Client().get("/runs/", HTTP_HOST="<script>x</script>.example")
    html = answer.content.decode()
    assert answer.status_code == 400 and "The request could not be read" in html
    assert "<script>x" not in html
