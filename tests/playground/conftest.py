"""Playground fixtures: loopback fake providers configured as a workspace's own providers."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.apps import apps

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.task_backends import DUMMY, IMMEDIATE, task_backend

LOOPBACK = ["127.0.0.0/8", "::1/128"]


@pytest.fixture(autouse=True)
def egress_allows_loopback(settings):
    """The fakes listen on 127.0.0.1, an address the server refuses by default outside the
    embedded profile: the playground tests make the operator allowance explicit. Tests of the
    refusal set ``settings.WORKBENCH_EGRESS_ALLOW = []``."""
    settings.WORKBENCH_EGRESS_ALLOW = LOOPBACK


# The squashed migration's copy of 0002_global_defaults (what a fresh database runs).
GLOBAL_DEFAULTS = importlib.import_module("playground.migrations.0001_squashed_0010_cache_write_1h_price")


@pytest.fixture(autouse=True)
def global_defaults(request):
    """The operator's global providers and models come from migration 0002 (on a fresh database:
    the squashed migration's create_global_defaults). A transactional test empties every table
    when it ends, and under xdist a worker may run one before these tests:
    they get the migration's rows back (the same function, on the current models)."""
    for name in ("transactional_db", "db"):
        if name in request.fixturenames:
            request.getfixturevalue(name)
            from playground.models import ProviderConfig

            if not ProviderConfig.objects.filter(workspace__isnull=True).exists():
                GLOBAL_DEFAULTS.create_global_defaults(apps, None)
            return


@pytest.fixture
def immediate_tasks():
    """Tasks (playground executions, forks) run as soon as they are enqueued, after the commit that
    stored their rows: what a worker with a free thread does at once."""
    with task_backend(IMMEDIATE) as backend:
        yield backend


@pytest.fixture
def stored_tasks(immediate_tasks):
    """Tasks are only recorded (the dummy backend's ``results``): the test runs their work itself."""
    with task_backend(DUMMY) as backend:
        yield backend


@pytest.fixture
def anthropic_fake():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def openai_fake():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake_models(db, workspace, anthropic_fake, openai_fake, settings, immediate_tasks):
    """A workspace with its own Anthropic and OpenAI-compatible providers pointing at the fakes."""
    from playground.models import ModelEntry, ProviderConfig

    anth = ProviderConfig(
        workspace=workspace,
        name="Fake Anthropic",
        kind="anthropic",
        base_url=anthropic_fake.url,
        max_retries=0,
    )
    anth.set_api_key("test-anthropic-key")
    anth.save()
    oai = ProviderConfig(
        workspace=workspace,
        name="Fake OpenAI",
        kind="openai",
        base_url=openai_fake.url + "/v1",
        max_retries=0,
    )
    oai.set_api_key("test-openai-key")
    oai.save()
    sonnet = ModelEntry.objects.create(
        workspace=workspace,
        provider=anth,
        model_id="claude-sonnet-4-6",
        display_name="Fake Sonnet",
        context_window=200_000,
        supports_thinking=True,
        supports_citations=True,
        supports_pdf=True,
        is_default=True,
        input_price=Decimal("3"),
        output_price=Decimal("15"),
        cache_read_price=Decimal("0.3"),
        cache_write_price=Decimal("3.75"),
    )
    local = ModelEntry.objects.create(
        workspace=workspace,
        provider=oai,
        model_id="llama-local",
        display_name="Fake local llama",
        context_window=8192,
        position=1,
    )
    return {"sonnet": sonnet, "local": local, "anthropic": anth, "openai": oai}
