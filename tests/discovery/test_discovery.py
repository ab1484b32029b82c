"""Discovery files: public (no session), the right content types, generated from settings and URLs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree

import orjson
import pytest
from django.test import Client, override_settings
from django.urls import reverse

from accounts.models import Scope

FILES = {
    "/llms.txt": "text/plain; charset=utf-8",
    "/llms-full.txt": "text/plain; charset=utf-8",
    "/agents.md": "text/markdown; charset=utf-8",
    "/robots.txt": "text/plain; charset=utf-8",
    "/sitemap.xml": "application/xml; charset=utf-8",
    "/.well-known/security.txt": "text/plain; charset=utf-8",
    "/.well-known/mcp.json": "application/json",
    "/security.md": "text/markdown; charset=utf-8",
}


@pytest.fixture
def anon() -> Client:
    return Client()


@pytest.fixture
def demo_run(db, workflow):
    from runs import actions
    from runs.actions.workspaces import get_or_create_workspace
    from runs.web.request import DEMO_RUN_ID, DEMO_WORKSPACE

    demo = get_or_create_workspace(DEMO_WORKSPACE)
    return actions.do_start_run(workspace=demo, workflow=workflow, actor="seed", run_id=DEMO_RUN_ID)


@pytest.mark.parametrize("path, content_type", FILES.items())
def test_public_with_the_right_content_type(anon, path, content_type, db):
    response = anon.get(path)
    assert response.status_code == 200, path
    assert response["Content-Type"] == content_type
    assert "public" in response["Cache-Control"]
    assert not response.cookies  # no session is created for a crawler
    assert anon.head(path).status_code == 200
    assert anon.post(path).status_code == 405


def test_llms_txt_has_title_summary_and_links(anon, demo_run):
    text = anon.get("/llms.txt").content.decode()
    lines = text.splitlines()
    assert lines[0] == "# Workbench"
    assert lines[2].startswith("> ")
    links = re.findall(r"^- \[([^\]]+)\]\((http://testserver/[^)]*)\)", text, re.M)
    targets = {url for _title, url in links}
    for name in ("runs:demo", "api:openapi-json", "agents_md", "llms_full_txt", "mcp_json"):
        assert f"http://testserver{reverse(name)}" in targets
    for _title, url in links:  # every link answers without a session
        assert anon.get(url.removeprefix("http://testserver")).status_code == 200, url


def test_links_follow_the_configured_origin_and_name(anon, db):
    with override_settings(WORKBENCH_SITE_URL="https://wb.example/", WORKBENCH_SITE_NAME="Acme Bench"):
        text = anon.get("/llms.txt").content.decode()
        sitemap = anon.get("/sitemap.xml").content.decode()
    assert text.startswith("# Acme Bench\n")
    assert "https://wb.example/runs/demo" in text and "testserver" not in text
    assert "<loc>https://wb.example/runs/demo</loc>" in sitemap


def test_agents_md_lists_rest_mcp_auth_scoping_limits(anon, db, settings):
    settings.WORKBENCH_RATE_LIMIT_PER_MINUTE = 123
    text = anon.get("/agents.md").content.decode()
    for heading in ("## Authentication", "## Scoping", "## Limits", "## REST", "## MCP"):
        assert heading in text
    for scope in Scope.values:
        assert f"`{scope}`" in text
    assert "123 requests per" in text
    # REST operations come from the OpenAPI document
    assert "`GET /api/runs`" in text and "`POST /api/runs/{run_id}/gates/resolve`" in text
    # MCP tools come from the server's registry
    pytest.importorskip("mcp")
    from runs.mcp.server import get_server

    for tool in get_server()._tool_manager.list_tools():
        assert f"- `{tool.name}` (" in text


def test_llms_full_txt_includes_the_guide_and_the_protocol(anon, db):
    text = anon.get("/llms-full.txt").content.decode()
    assert "# Workbench for agents" in text
    assert "`human_gate_requested`" in text and "`INTEGRITY_MISMATCH`" in text


def test_robots_disallows_private_apis_and_allows_the_demo(anon, db):
    text = anon.get("/robots.txt").content.decode()
    allow = re.findall(r"^Allow: (\S+)$", text, re.M)
    disallow = re.findall(r"^Disallow: (\S+)$", text, re.M)
    assert "/api/" in disallow and "/admin/" in disallow and "/runs/" in disallow
    assert "/playground/" in disallow and "/workspace/" in disallow
    assert reverse("runs:demo") in allow and "/api/openapi.json" in allow
    assert re.search(r"^Sitemap: http://testserver/sitemap.xml$", text, re.M)


def _robots_allows(text: str, path: str) -> bool:
    """Longest matching rule wins (RFC 9309), Allow on a tie."""
    best, allowed = -1, True
    for kind, prefix in re.findall(r"^(Allow|Disallow): (\S+)$", text, re.M):
        if path.startswith(prefix) and (len(prefix) > best or (len(prefix) == best and kind == "Allow")):
            best, allowed = len(prefix), kind == "Allow"
    return allowed


def test_robots_rules_per_path(anon, db):
    text = anon.get("/robots.txt").content.decode()
    assert _robots_allows(text, "/runs/demo")
    assert _robots_allows(text, "/llms.txt")
    assert not _robots_allows(text, "/runs/run_123/")
    assert not _robots_allows(text, "/api/runs")
    assert not _robots_allows(text, "/api/mcp")


def test_sitemap_lists_public_pages_only(anon, demo_run):
    root = ElementTree.fromstring(anon.get("/sitemap.xml").content)
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = [loc.text for loc in root.findall("s:url/s:loc", ns)]
    assert "http://testserver/runs/demo" in locs
    for loc in locs:
        response = anon.get(loc.removeprefix("http://testserver"))
        assert response.status_code == 200, loc  # public: no redirect to sign-in


def test_security_txt_follows_rfc_9116(anon, db, settings):
    settings.WORKBENCH_SECURITY_CONTACT = "security@wb.example"
    text = anon.get("/.well-known/security.txt").content.decode()
    fields = dict(line.split(": ", 1) for line in text.splitlines() if line)
    assert fields["Contact"] == "mailto:security@wb.example"
    assert fields["Policy"] == "http://testserver/security.md"
    assert fields["Canonical"] == "http://testserver/.well-known/security.txt"
    expires = datetime.strptime(fields["Expires"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    now = datetime.now(UTC)
    assert now < expires < now + timedelta(days=365)


def test_security_contact_defaults(anon, db, settings):
    settings.WORKBENCH_SECURITY_CONTACT = ""
    settings.ADMINS = [("Ops", "ops@wb.example")]
    assert "Contact: mailto:ops@wb.example" in anon.get("/.well-known/security.txt").content.decode()
    settings.ADMINS = []
    assert "Contact: http://testserver/security.md" in anon.get("/.well-known/security.txt").content.decode()


def test_mcp_descriptor(anon, db):
    pytest.importorskip("mcp")
    from runs.mcp.server import get_server

    doc = orjson.loads(anon.get("/.well-known/mcp.json").content)
    assert doc["name"] == "workbench" and doc["version"]
    assert doc["endpoint"] == "http://testserver/api/mcp"
    assert doc["transport"]["type"] == "streamable-http" and doc["transport"]["stateless"] is True
    assert {"2025-06-18", "2025-11-25", "2026-07-28"} <= set(doc["transport"]["protocolVersions"])
    assert doc["auth"]["type"] == "bearer" and set(doc["auth"]["scopes"]) == set(Scope.values)
    names = {tool.name for tool in get_server()._tool_manager.list_tools()}
    assert {t["name"] for t in doc["tools"]} == names
    assert doc["resources"] == [{"uriTemplate": "runs://{runId}", "mimeType": "application/json"}]
    oauth = doc["auth"]["oauth"]
    assert oauth["protectedResourceMetadata"] == "http://testserver/.well-known/oauth-protected-resource"
    assert oauth["authorizationServerMetadata"] == "http://testserver/.well-known/oauth-authorization-server"
    prm = orjson.loads(anon.get("/.well-known/oauth-protected-resource").content)
    assert prm["resource"] == doc["endpoint"]


def test_openapi_describes_the_mcp_endpoint(anon, db):
    """/api/mcp is served by the ASGI application, not ninja; the document still describes it (and
    the OAuth scheme), and the REST operations listed in agents.md leave it out."""
    pytest.importorskip("mcp")
    from runs.mcp.versions import MCP_PROTOCOL_VERSIONS

    doc = orjson.loads(anon.get("/api/openapi.json").content)
    item = doc["paths"]["/api/mcp"]
    post = item["post"]
    assert item["x-workbench-served-by"] == "mcp" and "Streamable HTTP" in item["summary"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["properties"]["jsonrpc"] == {
        "const": "2.0"
    }
    assert {"200", "401", "429"} <= set(post["responses"])
    assert "WWW-Authenticate" in post["responses"]["401"]["headers"]
    header = next(p for p in post["parameters"] if p["name"] == "MCP-Protocol-Version")
    assert tuple(header["schema"]["enum"]) == MCP_PROTOCOL_VERSIONS  # the versions the server speaks
    flows = doc["components"]["securitySchemes"]["OAuth2"]["flows"]["authorizationCode"]
    assert flows["authorizationUrl"] == "/oauth/authorize/" and set(flows["scopes"]) == {
        "read",
        "write",
        "review",
    }
    agents = anon.get("/agents.md").content.decode()
    assert "`POST /api/mcp`" not in agents and "oauth-protected-resource" in agents


def test_openapi_describes_the_otlp_endpoints(anon, db):
    """/v1/traces and /v1/logs are plain Django views; the document describes both (protobuf and
    JSON bodies, partialSuccess answers) beside /api/mcp and the REST routes."""
    doc = orjson.loads(anon.get("/api/openapi.json").content)
    for signal, rejected in (("traces", "rejectedSpans"), ("logs", "rejectedLogRecords")):
        post = doc["paths"][f"/v1/{signal}"]["post"]
        assert post["operationId"] == f"otlp_{signal}"
        assert set(post["requestBody"]["content"]) == {"application/x-protobuf", "application/json"}
        answer = post["responses"]["200"]["content"]["application/json"]["schema"]
        assert rejected in orjson.dumps(answer).decode()
        assert {"400", "401", "413", "415", "429"} <= set(post["responses"])
    assert "/api/mcp" in doc["paths"] and "/api/runs/{run_id}/ledger" in doc["paths"]
    assert "/api/ledger" in doc["paths"]
