"""The world the security suite attacks: a victim workspace full of secrets, an outsider with a
workspace of their own, and values for every path parameter kind (existing and missing).

acme (victim): alice owner, vera viewer; a run whose metadata, artifact, annotation, playground
execution, cached response and token name all carry ``CANARY``. globex: charlie, owner.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

CANARY = "CANARY-9c1f7e"
VICTIM_RUN = "run_victim_a1"
MISSING_RUN = "run_victim_z9"  # same length: 404 bodies can be compared byte for byte
CACHE_KEY = "a" * 64
MISSING_CACHE_KEY = "b" * 64
INVITATION_ID = 731977  # unusual numbers: 404 bodies are compared after replacing them
MISSING_INVITATION_ID = 731979
WEBHOOK_ID = "wh_victim0000000000000001"
MISSING_WEBHOOK_ID = "wh_victim0000000000000009"
DELIVERY_ID = "msg_victim00000000000000000001"
MISSING_DELIVERY_ID = "msg_victim00000000000000000009"
DATASET_ID = "ds_victim0000000000000001"  # evals: a dataset and an experiment of acme
MISSING_DATASET_ID = "ds_victim0000000000000009"
EXPERIMENT_ID = "exp_victim0000000000000001"
MISSING_EXPERIMENT_ID = "exp_victim0000000000000009"
QUEUE_ID = "q_victim00000001"
MISSING_QUEUE_ID = "q_victim00000009"
ITEM_ID = "qi_victim0000001"
MISSING_ITEM_ID = "qi_victim0000009"
OAUTH_TOKEN_ID = 731983  # an OAuth access token alice granted a host in acme
MISSING_OAUTH_TOKEN_ID = 731987
PROMPT_NAME = "victim/prompt-a1"  # a prompt of acme (folders with "/"), its body carries CANARY
MISSING_PROMPT_NAME = "victim/prompt-z9"
IMPORT_JOB_ID = "imp_victim0000000000000001"  # a background import of acme (its error names CANARY)
MISSING_IMPORT_JOB_ID = "imp_victim0000000000000009"
JUDGE_ID = "jg_victim000000000001"  # a gate judge of acme (judges), its name carries CANARY
MISSING_JUDGE_ID = "jg_victim000000000009"
PROMOTION_ID = 731991  # a pending promotion request of that prompt's production label
MISSING_PROMOTION_ID = 731993
MONITOR_ID = "mon_victim0000000000001"  # a monitor of acme (its name carries CANARY)
MISSING_MONITOR_ID = "mon_victim0000000000009"


@dataclass
class World:
    workspace: object
    other_workspace: object
    alice: object
    vera: object
    charlie: object
    run: object
    execution_id: str
    token_key_id: str
    read_token: str  # acme, scopes ["read"]
    outsider_token: str  # globex, every scope a token can hold (manage included)
    workflow: dict
    saved_prompt_pk: int
    io_seq: int  # the seq of the victim run's model call (its request carries CANARY)

    def query_values(self) -> list[str]:
        """Values a query parameter could use to name one of the victim's objects."""
        return [
            VICTIM_RUN,
            f"{VICTIM_RUN}:{self.io_seq}",
            str(self.saved_prompt_pk),
            self.execution_id,
            PROMPT_NAME,
            f"{PROMPT_NAME}@2",
        ]

    def values(self, missing: bool = False) -> dict[str, object]:
        """A value for every parameter kind of tests/security/routes.py (PARAM_KINDS)."""
        return {
            "run_id": MISSING_RUN if missing else VICTIM_RUN,
            "execution_id": str(uuid.UUID(int=7)) if missing else self.execution_id,
            "key_id": ("z" * len(self.token_key_id)) if missing else self.token_key_id,
            "key": MISSING_CACHE_KEY if missing else CACHE_KEY,
            "invitation_id": MISSING_INVITATION_ID if missing else INVITATION_ID,
            "webhook_id": MISSING_WEBHOOK_ID if missing else WEBHOOK_ID,
            "delivery_id": MISSING_DELIVERY_ID if missing else DELIVERY_ID,
            "oauth_token_id": MISSING_OAUTH_TOKEN_ID if missing else OAUTH_TOKEN_ID,
            "dataset_id": MISSING_DATASET_ID if missing else DATASET_ID,
            "experiment_id": MISSING_EXPERIMENT_ID if missing else EXPERIMENT_ID,
            "prompt_name": MISSING_PROMPT_NAME if missing else PROMPT_NAME,
            "promotion_id": MISSING_PROMOTION_ID if missing else PROMOTION_ID,
            "job_id": MISSING_IMPORT_JOB_ID if missing else IMPORT_JOB_ID,
            "queue_id": MISSING_QUEUE_ID if missing else QUEUE_ID,
            "item_id": MISSING_ITEM_ID if missing else ITEM_ID,
            "monitor_id": MISSING_MONITOR_ID if missing else MONITOR_ID,
            "judge_id": MISSING_JUDGE_ID if missing else JUDGE_ID,
            "seq": 1,
            "artifact_key": "notes",
        }

    def scoped_values(self) -> list[tuple[str, str]]:
        """(victim value, missing value) pairs, for normalizing the two 404 bodies."""
        here, gone = self.values(), self.values(missing=True)
        return [(str(here[k]), str(gone[k])) for k in here if here[k] != gone[k]]


def build_world(workspace, other_workspace, alice, vera, charlie, workflow) -> World:
    from accounts.tokens import create_token
    from playground.models import Execution, SavedPrompt
    from runs import actions
    from runs.engine import commands as c
    from runs.models import CachedResponse, Delivery, Event, ImportJob, Invitation, Monitor, Webhook

    run = actions.do_start_run(
        workspace=workspace,
        workflow=workflow,
        run_id=VICTIM_RUN,
        actor="user:alice",
        metadata={"secret": CANARY},
        tags=["victim"],
    )
    for command in (
        c.BeginStep(step_id="parse"),
        c.LogModelIO(
            direction="request",
            provider="anthropic",
            model="claude-test",
            payload={
                "model": "claude-test",
                "messages": [{"role": "user", "content": CANARY}],
                "max_tokens": 5,
            },
            step_id="parse",
            correlation_id="call-1",
        ),
        c.WriteArtifact(key="notes", type_id="json", data={"secret": CANARY}),
        c.CompleteStep(step_id="parse"),
        c.BeginStep(step_id="review"),  # PAUSE_BEFORE: a gate waits
        c.Annotate(text=f"note {CANARY}"),
    ):
        actions.do_command(workspace=workspace, run_id=VICTIM_RUN, command=command, actor="user:alice")
    execution = Execution.objects.create(
        workspace=workspace,
        user=alice,
        provider_kind="anthropic",
        model_name="claude-test",
        request=json.dumps({"messages": [{"role": "user", "content": CANARY}]}),
        user_content=json.dumps([{"type": "text", "text": CANARY}]),
        content=json.dumps([{"type": "text", "text": CANARY}]),
        response_text=CANARY,
        status="completed",
    )
    CachedResponse.objects.create(
        workspace=workspace,
        key=CACHE_KEY,
        key_v1=CACHE_KEY,
        provider="anthropic",
        model="claude-test",
        request=f'{{"q": "{CANARY}"}}',
        response=f'{{"response": {{"text": "{CANARY}"}}, "chunks": []}}',  # the shape record() writes
        response_digest="0" * 64,
    )
    Invitation.objects.create(
        pk=INVITATION_ID,
        workspace=workspace,
        invitee=f"dave-{CANARY}",
        role="owner",
        invited_by=alice,
        expires_at=timezone.now() + timedelta(days=7),
    )
    hook = Webhook.objects.create(
        public_id=WEBHOOK_ID,
        workspace=workspace,
        url=f"https://hooks.example/{CANARY}",
        description=f"hook {CANARY}",
        events=["gate.requested"],
        secret="whsec_" + "A" * 43 + "=",
    )
    Delivery.objects.create(
        public_id=DELIVERY_ID,
        workspace=workspace,
        webhook=hook,
        channel="webhook",
        event_type="gate.requested",
        payload=f'{{"type": "gate.requested", "data": {{"secret": "{CANARY}"}}}}',
        status="failed",
        response_excerpt=CANARY,
        next_attempt_at=timezone.now(),
    )
    saved = SavedPrompt.objects.create(workspace=workspace, name=f"saved {CANARY}", prompt=CANARY)
    Monitor.objects.create(
        public_id=MONITOR_ID, workspace=workspace, name=f"spend {CANARY}", metric="cost_hour",
        workflow_id=CANARY, alert=1.0,
    )  # fmt: skip
    _evals(workspace)
    io_seq = Event.objects.get(run=run, type="model_io").seq
    read = create_token(workspace=workspace, name=f"reader {CANARY}", scopes=["read"])
    _oauth_token(workspace, alice)
    _prompt(workspace, alice)
    _review_queue(workspace, run)
    _judge(workspace, run)
    ImportJob.objects.create(
        job_id=IMPORT_JOB_ID, workspace=workspace, file="gone.json", status="failed",
        error_code="INVALID_JSON", error_message=CANARY,
    )  # fmt: skip
    outsider = create_token(
        workspace=other_workspace, name="outsider", scopes=["read", "write", "review", "manage"]
    )
    actions.do_start_run(
        workspace=other_workspace, workflow=workflow, run_id="run_globex", actor="user:charlie"
    )
    return World(
        workspace=workspace,
        other_workspace=other_workspace,
        alice=alice,
        vera=vera,
        charlie=charlie,
        run=run,
        execution_id=str(execution.pk),
        token_key_id=read.token.key_id,
        read_token=read.secret,
        outsider_token=outsider.secret,
        workflow=workflow,
        saved_prompt_pk=saved.pk,
        io_seq=io_seq,
    )


def _evals(workspace) -> None:
    """A dataset (an item from the victim run) and a finished experiment over it, in acme."""
    from django.utils import timezone

    from evals import actions as evals_actions
    from evals.models import Dataset, Experiment, ExperimentItem

    dataset = Dataset.objects.create(
        public_id=DATASET_ID, workspace=workspace, name=f"data {CANARY}", created_at=timezone.now()
    )
    evals_actions.do_add_items(
        dataset=dataset,
        items=[{"id": "i1", "input": {"q": CANARY}, "expected": CANARY, "source": {"runId": VICTIM_RUN}}],
    )
    experiment = Experiment.objects.create(
        public_id=EXPERIMENT_ID,
        workspace=workspace,
        dataset=dataset,
        as_of_revision=1,
        name=f"exp {CANARY}",
        evaluator={"kind": "exact"},
        status="completed",
        created_at=timezone.now(),
    )
    ExperimentItem.objects.create(
        experiment=experiment, item_key="i1", status="completed", output=f'"{CANARY}"'
    )


def _prompt(workspace, user) -> None:
    """Two versions of a prompt of acme, production protected, a promotion to version 2 pending."""
    from runs.actions.permissions import ROLE_SCOPES
    from runs.actions.prompts import do_move_label, do_protect_label, do_save_prompt_version
    from runs.models import PromotionRequest

    owner = ROLE_SCOPES["owner"]
    for text in (f"one {CANARY}", f"two {CANARY}"):
        do_save_prompt_version(workspace, name=PROMPT_NAME, body=text, scopes=owner, user=user, tags=[CANARY])
    do_move_label(workspace, name=PROMPT_NAME, label="production", version=1, scopes=owner, user=user)
    do_protect_label(workspace, label="production", protected=True, scopes=owner, user=user)
    request = do_move_label(
        workspace, name=PROMPT_NAME, label="production", version=2, scopes=owner, user=user
    )
    PromotionRequest.objects.filter(pk=request.request.pk).update(id=PROMOTION_ID)


def _oauth_token(workspace, user) -> None:
    """An MCP host alice authorized in acme (accounts.oauth): listed and revocable on acme's tokens page."""
    from oauth2_provider.models import AccessToken, Application

    from accounts.oauth import workspace_scope

    host = Application.objects.create(
        name=f"host {CANARY}",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
    )
    AccessToken.objects.create(
        pk=OAUTH_TOKEN_ID,
        user=user,
        application=host,
        token=f"oauth-{CANARY}",
        expires=timezone.now() + timedelta(hours=1),
        scope=f"read {workspace_scope(workspace)}",
    )


_VOLATILE = [
    (re.compile(rb'nonce="[^"]*"'), b'nonce=""'),
    (re.compile(rb'name="csrfmiddlewaretoken" value="[^"]*"'), b'name="csrfmiddlewaretoken" value=""'),
    (re.compile(rb'"X-CSRFToken": *"[^"]*"'), b'"X-CSRFToken": ""'),
]


def normalized(body: bytes, world: World, *, missing: bool) -> bytes:
    """``body`` with the requested ids (and per-request tokens) replaced by placeholders."""
    from urllib.parse import quote

    for here, gone in world.scoped_values():
        value = gone if missing else here
        for form in {value, quote(value, safe=""), quote(value)}:
            body = body.replace(form.encode(), b"<ID>")
    for pattern, replacement in _VOLATILE:
        body = pattern.sub(replacement, body)
    return body


# Fields that reads may touch (last use of a token, cache hit counters): not a change of data.
_READ_SIDE_EFFECTS = {"last_used_at", "last_hit_at", "hits"}


def fingerprint(workspace=None) -> dict[str, list]:
    """Every row of the project's own models (minus read side effects), or only those of
    ``workspace`` (rows with a workspace or run link; others always count): equal before and
    after a refused write means nothing changed. The matrices take it thousands of times: each
    model's query is compiled once (:func:`_fingerprint_queries`) and its raw rows compared."""
    from django.db import connection

    out: dict[str, list] = {}
    with connection.cursor() as cursor:
        for label, sql, params in _fingerprint_queries(
            connection.vendor, workspace.pk if workspace else None
        ):
            cursor.execute(sql, params)
            out[label] = cursor.fetchall()
    return out


@functools.cache
def _fingerprint_queries(vendor: str, workspace_pk) -> list[tuple[str, str, tuple]]:
    from django.apps import apps

    queries = []
    for app in ("runs", "accounts", "playground", "evals", "review", "judges", "oauth2_provider"):
        for model in apps.get_app_config(app).get_models():
            fields = [f.attname for f in model._meta.concrete_fields if f.attname not in _READ_SIDE_EFFECTS]
            rows = model._default_manager.order_by("pk")
            names = {f.name for f in model._meta.concrete_fields}
            if workspace_pk is not None and "workspace" in names:
                rows = rows.filter(workspace_id=workspace_pk)
            elif workspace_pk is not None and "run" in names:
                rows = rows.filter(run__workspace_id=workspace_pk)
            sql, params = rows.values_list(*fields).query.sql_with_params()
            queries.append((model._meta.label, sql, tuple(params)))
    return queries


def _judge(workspace, run) -> None:
    """A gate judge of acme with a proposal on the victim run (judges)."""
    from judges.models import GateJudge, Proposal

    judge = GateJudge.objects.create(
        workspace=workspace, judge_id=JUDGE_ID, name=f"judge-{CANARY}", kind="rule", workflow_id="wf",
        step_id="review", gate="PAUSE_BEFORE", config={"rules": {"errors": True}, "onMatch": "rejected"},
    )  # fmt: skip
    Proposal.objects.create(
        judge=judge, run=run, gate_key="review|PAUSE_BEFORE||implied", step_id="review", gate="PAUSE_BEFORE",
        after_seq=1, status="proposed", decision="approved", confidence=1.0, rationale=CANARY,
    )  # fmt: skip


def _review_queue(workspace, run) -> None:
    """An annotation queue of acme with the victim run in it (review)."""
    from review.models import DataType, Item, Queue, ScoreConfig

    queue = Queue.objects.create(
        workspace=workspace, queue_id=QUEUE_ID, name=f"queue {CANARY}", instructions=CANARY
    )
    ScoreConfig.objects.create(queue=queue, name="ok", data_type=DataType.BOOLEAN, description=CANARY)
    Item.objects.create(queue=queue, item_id=ITEM_ID, run=run)
