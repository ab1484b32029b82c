"""The official SDKs read the operator's environment by themselves (custom headers, tokens,
organization, project, base URLs). None of it may reach a workspace-configured URL: the request
that arrives at a loopback catcher carries only what the workspace configured."""

from __future__ import annotations

import pytest

from playground import compose as c
from runs.providers import ProviderSettings, call
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI

LOOPBACK = ("127.0.0.0/8",)
SECRET = "operator-secret-d41d8cd9"

OPERATOR_ENVIRONMENT = {
    "ANTHROPIC_API_KEY": f"sk-ant-{SECRET}-api",
    "ANTHROPIC_AUTH_TOKEN": f"{SECRET}-auth-token",
    "ANTHROPIC_CUSTOM_HEADERS": f"X-Operator: {SECRET}-custom\nAuthorization: Bearer {SECRET}-custom-auth",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/operator-anthropic",
    "ANTHROPIC_WEBHOOK_SIGNING_KEY": f"{SECRET}-webhook",
    "OPENAI_API_KEY": f"sk-{SECRET}-openai",
    "OPENAI_ADMIN_KEY": f"{SECRET}-admin",
    "OPENAI_ORG_ID": f"org-{SECRET}",
    "OPENAI_PROJECT_ID": f"proj-{SECRET}",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/operator-openai",
    "OPENAI_CUSTOM_HEADERS": f"X-Operator: {SECRET}-custom\nAuthorization: Bearer {SECRET}-custom-auth",
    "OPENAI_WEBHOOK_SECRET": f"{SECRET}-webhook",
}


@pytest.fixture
def operator_environment(monkeypatch):
    for name, value in OPERATOR_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


def _leaks(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if SECRET in value or "operator" in name.lower()}


@pytest.mark.parametrize("workspace_key", ["workspace-key", None])
def test_anthropic_requests_carry_nothing_from_the_operators_environment(operator_environment, workspace_key):
    with FakeAnthropic(api_key=workspace_key) as catcher:
        settings = ProviderSettings(
            "anthropic", api_key=workspace_key, base_url=catcher.url, max_retries=0, egress_allow=LOOPBACK
        )
        comp = c.compose(c.Session(prompt="hi"), c.ModelSpec("anthropic", "claude-sonnet-4-6"))
        result = call(settings, comp.request, lambda kind, text: None)
        assert result.text  # the call reached the workspace's URL, not ANTHROPIC_BASE_URL
        (headers,) = catcher.headers
    assert _leaks(headers) == {}
    assert "x-operator" not in headers
    if workspace_key:
        assert workspace_key in (
            headers.get("x-api-key"),
            headers.get("authorization", "").removeprefix("Bearer "),
        )


@pytest.mark.parametrize("workspace_key", ["workspace-key", None])
def test_openai_requests_carry_nothing_from_the_operators_environment(operator_environment, workspace_key):
    with FakeOpenAI(api_key=workspace_key) as catcher:
        settings = ProviderSettings(
            "openai",
            api_key=workspace_key,
            base_url=catcher.url + "/v1",
            max_retries=0,
            egress_allow=LOOPBACK,
        )
        model = c.ModelSpec("openai", "gpt-5-mini", max_tokens_param="max_completion_tokens")
        result = call(settings, c.compose(c.Session(prompt="hi"), model).request, lambda kind, text: None)
        assert result.text
        (received,) = [r for r in catcher.server.received if r.method == "POST"]
    headers = received.headers
    assert _leaks(headers) == {}
    assert "openai-organization" not in headers
    assert "openai-project" not in headers
    assert "x-operator" not in headers
