"""Settings forms fit a 390 px phone: no input is given a fixed width of tens of characters
(``size="60"`` made /settings/webhooks/ 552 px wide at 390 px)."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["/settings/webhooks/"])
def test_no_input_is_wider_than_a_phone(client, alice, url):
    login(client, alice)
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<input" in html
    sizes = [int(n) for n in re.findall(r'<input[^>]*\ssize="(\d+)"', html)]
    assert all(n <= 30 for n in sizes), sizes
