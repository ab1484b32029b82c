"""Storage: workspaces, runs (a projection), append-only events, artifact and rule set versions.

The models of other modules are imported back at the end, so ``from runs.models import X`` holds
every model: notifications (runs.models_notify), prompts (runs.models_prompts), rollups
(runs.models_rollups), background imports (runs.models_imports) and workers (runs.models_workers).

Event bodies, artifact bodies and projections are stored as JSON *text* (not JSONField): the
protocol JSON must come back exactly as it went in (PostgreSQL's jsonb would reorder keys and
normalise numbers), and hashing always works on the canonical form, never on database text.
The columns beside them that hold protocol strings use runs.fields, which stores NUL (U+0000)
on PostgreSQL too.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.fields import ProtocolCharField, ProtocolJSONField
from runs.protocol.values import loads


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    REVIEWER = "reviewer", "Reviewer"
    VIEWER = "viewer", "Viewer"


ROLE_RANK = {Role.VIEWER: 0, Role.REVIEWER: 1, Role.OWNER: 2}


class Workspace(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    is_personal = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.slug


_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")


class MembershipQuerySet(models.QuerySet):
    def in_workspace(self, slug: str | None) -> MembershipQuerySet:
        """Memberships in the workspace called ``slug``; none for text that is no slug at all
        (a NUL or any other character a slug cannot hold never reaches the database)."""
        if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
            return self.none()
        return self.filter(workspace__slug=slug)


class Membership(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="uniq_membership")]

    def has_role(self, role: str) -> bool:
        return ROLE_RANK[Role(self.role)] >= ROLE_RANK[Role(role)]


class InvitationStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    REVOKED = "revoked"


class InvitationQuerySet(models.QuerySet):
    def open(self, *, now=None) -> InvitationQuerySet:
        """Pending and not expired: what an invitee may still accept."""

        return self.filter(status=InvitationStatus.PENDING, expires_at__gt=now or timezone.now())

    def addressed_to(self, user) -> InvitationQuerySet:
        """Invitations naming ``user``: by username or by e-mail address (either case)."""
        names = models.Q(invitee__iexact=user.get_username())
        email = (getattr(user, "email", "") or "").strip()
        if email:
            names |= models.Q(invitee__iexact=email)
        return self.filter(names)


class Invitation(models.Model):
    """An owner's offer of a role in a workspace; a membership exists only once the invitee accepts.

    ``invitee`` is what the owner typed (a username or an e-mail address); it is never checked
    against the accounts when the invitation is made, so making one says nothing about whether
    such an account exists."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    invitee = models.CharField(max_length=254)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    responded_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "invitee"], name="invitation_open_idx")]

    def __str__(self) -> str:
        return f"{self.invitee} → {self.workspace} ({self.status})"


class RunQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace) -> RunQuerySet:
        """The one choke point for reading runs: always scoped to a workspace."""
        return self.filter(workspace=workspace)

    def by_run_id(self, workspace: Workspace, run_id: str) -> RunQuerySet:
        """The run with protocol id `run_id` in this workspace (an empty queryset elsewhere)."""
        return self.filter(workspace=workspace, run_id=run_id)


class RunStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Run(models.Model):
    """The projection of a run: derived from its events, updated in the same transaction.

    The primary key is a surrogate; `run_id` is the protocol's `run.id`, unique only within a
    workspace, so one workspace's ids say nothing about another's (the same id in two workspaces
    is two runs). Look runs up by (workspace, run_id) through the selectors, never by id alone.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="runs")
    run_id = ProtocolCharField(max_length=200)
    workflow_id = ProtocolCharField(max_length=200, db_index=True)
    workflow_version = models.IntegerField(default=0)
    title = ProtocolCharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, db_index=True)
    started_at = models.DateTimeField(db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    tags = ProtocolJSONField(default=list, blank=True)
    subject = ProtocolJSONField(null=True, blank=True)
    # Projection: the engine state (RunState.to_json) as JSON text; `doc` is the protocol RunInstance.
    doc = models.TextField()
    state = models.TextField()
    revision = models.IntegerField(default=0)
    last_seq = models.IntegerField(default=0)
    has_engine = models.BooleanField(default=True)
    # An engine snapshot imported verbatim from a bundle, exported unchanged until the next append.
    imported_engine = models.TextField(null=True, blank=True)
    # A bundle's run document and event count: folding replays them, then takes the document as is.
    import_doc = models.TextField(null=True, blank=True)
    import_seq = models.IntegerField(null=True, blank=True)
    # Imported from a signed bundle: the signature verdict at import (signing.Verdict.to_json).
    import_attestation = models.TextField(null=True, blank=True)
    pending_gates = models.IntegerField(default=0, db_index=True)
    # Gates last rejected (not requested again since): "running" in the protocol, shown apart.
    rejected_gates = models.IntegerField(default=0, db_index=True)
    event_count = models.IntegerField(default=0)
    model_calls = models.IntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)
    cost_totals = ProtocolJSONField(default=dict, blank=True)  # currency -> decimal string
    # The runs list's sort keys (projection): duration in ms (-1 while running or without an end),
    # the cost in the run's main currency (its largest total), and the errors recorded (error
    # events, failed spans, failed steps; counted as they are appended)
    duration_ms = models.BigIntegerField(default=-1, db_default=-1)
    cost_amount = models.FloatField(default=0.0, db_default=0.0)
    error_count = models.IntegerField(default=0, db_default=0)
    created_by = ProtocolCharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RunQuerySet.as_manager()
    # Across workspaces on purpose (a run authorised by its pk, operator commands); else selectors.
    unscoped = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-created_at"]
        # Every list of runs is a keyset page on (started_at, pk) descending within a workspace:
        # one index per filter the runs list offers, each ending in that order, so a page reads its
        # rows and stops (the EXPLAIN test in tests/storage/test_query_plans.py holds them to it).
        indexes = [
            models.Index(fields=["workspace", "-started_at", "-id"], name="run_ws_started_pk"),
            models.Index(fields=["workspace", "status", "-started_at", "-id"], name="run_ws_status_started"),
            models.Index(
                fields=["workspace", "workflow_id", "-started_at", "-id"], name="run_ws_workflow_started"
            ),
            models.Index(
                fields=["workspace", "-started_at", "-id"],
                condition=models.Q(rejected_gates__gt=0),
                name="run_ws_rejected",
            ),
            # the runs list sorted by a column: a keyset page per sort, both directions
            models.Index(fields=["workspace", "-duration_ms", "-id"], name="run_ws_duration"),
            models.Index(fields=["workspace", "-cost_amount", "-id"], name="run_ws_cost"),
            models.Index(fields=["workspace", "-total_tokens", "-id"], name="run_ws_tokens"),
            models.Index(fields=["workspace", "-error_count", "-id"], name="run_ws_errors"),
            # the inbox and the navigation's pending-gate count
            models.Index(
                fields=["workspace", "-started_at", "-id"],
                condition=models.Q(pending_gates__gt=0, status="running"),
                name="run_ws_waiting",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "run_id"], name="uniq_run_id_per_workspace")
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def run_doc(self) -> dict:
        return loads(self.doc)

    @property
    def is_finished(self) -> bool:
        return self.status != RunStatus.RUNNING


class RunParent(models.Model):
    """Lineage: a run's parents (fork source or several parents), in protocol order."""

    child = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="parent_links")
    parent_run_id = ProtocolCharField(max_length=200, db_index=True)
    position = models.IntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["child", "parent_run_id"], name="uniq_run_parent")]


STARTS = models.Q(type="step_started")


class Event(models.Model):
    """One trace event, appended and never updated. `body` is the exact protocol JSON.

    On PostgreSQL the table is partitioned by ranges of ``run_id``, one range per month (migration
    0032, runs.actions.partitions): the key below contains the partition key, a run's events are
    all in one partition, and retention drops whole partitions."""

    # The key is (run, seq): no surrogate id, and its index serves every lookup by run.
    pk = models.CompositePrimaryKey("run", "seq")
    # No foreign-key constraint in the database (the key's first column is the run): events are
    # written by the one write path to a run it holds locked, and deleted before their run (the
    # ORM's cascade, retention's batches). The constraint's checks were a trigger per inserted event
    # (PostgreSQL: ~8 us a row at commit, 100,000 rows 0.54 -> 1.99 s) and, when a run row was
    # deleted, a walk of every deleted event's index entry under the run row's lock.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="events", db_index=False, db_constraint=False
    )
    seq = models.IntegerField()
    event_id = ProtocolCharField(max_length=200)
    type = ProtocolCharField(max_length=40)
    ts = models.CharField(max_length=40)
    step_id = ProtocolCharField(max_length=200, blank=True, default="")
    correlation_id = ProtocolCharField(max_length=200, blank=True, default="")
    body = models.TextField()
    # Who did it (user or token); stored beside the event, never inside its protocol JSON.
    actor = ProtocolCharField(max_length=200, blank=True, default="")
    recorded_at = models.DateTimeField(auto_now_add=True)
    # The span tree's index key (span_ref_of): a level, a span's end, failed spans by range scans.
    span_ref = ProtocolCharField(max_length=220, blank=True, default="")

    class Meta:
        ordering = ["seq"]
        indexes = [
            models.Index(fields=["run", "type", "seq"], name="event_run_type"),
            models.Index(fields=["run", "step_id", "seq"], name="event_run_step"),
            models.Index(fields=["run", "correlation_id", "seq"], name="event_run_corr"),
            # A host's append refuses an event id the run already holds (DUPLICATE_EVENT_ID).
            models.Index(fields=["run", "event_id"], name="event_run_event_id"),
            models.Index(fields=["run", "type", "span_ref", "seq"], name="event_run_span"),
            # Attempt numbers on the timeline: a step's starts counted by an index-only scan.
            models.Index(fields=["run", "step_id", "seq"], name="event_step_starts", condition=STARTS),
        ]

    @property
    def data(self) -> dict:
        return loads(self.body)


SPAN_PARENT = "parent:"  # span_started: "parent:<parentSpanId>", a root "parent:"
SPAN_END = "end:"  # span_ended: "end:<spanId>" ...
SPAN_FAILED = "error:"  # ... or "error:<spanId>" when the span failed


def span_ref_of(event: dict) -> str:
    """The ``span_ref`` column of a protocol event: who a started span's parent is, which span an
    end closes and whether it failed, so that children of a span (type ``span_started``, ref
    ``parent:<id>``), the end of a span (``span_ended``, ``end:<id>`` or ``error:<id>``) and the
    failed spans (the ``error:`` range) are each one range scan of (run, type, span_ref, seq)."""
    kind = event.get("type")
    if kind == "span_started":
        parent = event.get("parentSpanId")
        return SPAN_PARENT + (parent if isinstance(parent, str) else "")
    if kind == "span_ended":
        span_id = event.get("spanId")
        failed = event.get("status") == "error" or bool(event.get("error"))
        return (SPAN_FAILED if failed else SPAN_END) + (span_id if isinstance(span_id, str) else "")
    return ""


def sqlite_index_hint(index: str) -> str:
    """`INDEXED BY` on SQLite, where the planner, without statistics, reads a long run's whole key
    range for `run = ? AND column IN (...)` instead of probing the index that has both (an O(run
    length) query per append). PostgreSQL plans from its statistics."""
    from django.db import connection

    return f" INDEXED BY {index}" if connection.vendor == "sqlite" else ""


def held_event_ids(run: Run, event_ids: list[str], *, limit: int = 5) -> list[str]:
    """Up to ``limit`` of ``event_ids`` the run already holds (one index probe per id)."""
    from django.db import connection

    held: list[str] = []
    with connection.cursor() as cursor:
        for start in range(0, len(event_ids), 900):
            chunk = event_ids[start : start + 900]
            cursor.execute(
                f"SELECT event_id FROM {Event._meta.db_table}{sqlite_index_hint('event_run_event_id')}"
                f" WHERE run_id = %s AND event_id IN ({', '.join(['%s'] * len(chunk))}) LIMIT %s",
                [run.pk, *chunk, limit - len(held)],
            )
            held += [row[0] for row in cursor.fetchall()]
            if len(held) >= limit:
                break
    return held


class ArtifactVersion(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifact_versions")
    key = ProtocolCharField(max_length=300)
    version = models.IntegerField()
    type_id = ProtocolCharField(max_length=200)
    seq = models.IntegerField(null=True, blank=True)  # the event that produced it, when known
    body = models.TextField()  # the protocol ArtifactVersion JSON

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key", "version"], name="uniq_artifact_version")
        ]

    @property
    def data(self) -> dict:
        return loads(self.body)


class RuleSetVersion(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rule_set_versions")
    rule_set_id = ProtocolCharField(max_length=200)
    version = models.IntegerField()
    seq = models.IntegerField(null=True, blank=True)
    body = models.TextField()  # the protocol RuleSet JSON

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "rule_set_id", "version"], name="uniq_ruleset_version")
        ]

    @property
    def data(self) -> dict:
        return loads(self.body)


class RunSnapshot(models.Model):
    """The projection after event `seq`, kept every N events so state-at-seq stays cheap."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="snapshots")
    seq = models.IntegerField()
    state = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="uniq_snapshot_seq")]


class ForkMode(models.TextChoices):
    REPLAY = "replay"
    BRANCH = "branch"


class ForkStatus(models.TextChoices):
    PENDING = "pending"  # waiting for the replay worker
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    EXTERNAL = "external"  # no step code here: the host drives the fork through the API or client
    WAITING = "waiting"  # stopped at a gate nobody decided; a reviewer's decision resumes it


class RunFork(models.Model):
    """How a fork came to be (source, mode, fork point, overlay) and, for a replay, how far its
    events agree with the source's. Beside the run, never inside its protocol document."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="fork_info")
    source = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="forks")
    source_run_id = ProtocolCharField(max_length=200)  # kept when the source is deleted
    mode = models.CharField(max_length=16, choices=ForkMode.choices)
    from_seq = models.IntegerField()
    overlay = ProtocolJSONField(default=dict, blank=True)
    history = models.IntegerField()  # source events copied (seqs 1..history)
    source_last_seq = models.IntegerField()  # length of the source's log when forked
    status = models.CharField(max_length=16, choices=ForkStatus.choices, default=ForkStatus.PENDING)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    # Replay: `cursor` counts the fork's own events as source positions (markers not counted).
    cursor = models.IntegerField(default=0)
    compared = models.IntegerField(default=0)
    matched = models.IntegerField(default=0)
    divergence = ProtocolJSONField(null=True, blank=True)  # {sourceSeq, replaySeq, kind, original, replay}
    cache_hits = models.IntegerField(default=0)
    provider_calls = models.IntegerField(default=0)
    # The django.tasks task row re-executing it (its claim), and how many times one started it
    # since it was last pending: a worker that dies mid-replay leaves it running under that row,
    # which runs again and resumes it (runs.execution.replay.run_fork).
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"], name="runfork_status")]


class CachedResponse(models.Model):
    """One recorded model answer, addressed by the LLM cache key of its request (the seed's
    invocation log). Namespaced by workspace: a key never finds another workspace's answer."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="cached_responses")
    key = models.CharField(max_length=64)  # v2 (semantic request digest)
    key_v1 = models.CharField(max_length=64)  # seed 002's portable recipe
    provider = ProtocolCharField(max_length=100, blank=True)
    model = ProtocolCharField(max_length=200, blank=True)
    run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="cached_responses")
    source_run_id = ProtocolCharField(max_length=200, blank=True)
    request_seq = models.IntegerField(null=True, blank=True)
    response_seq = models.IntegerField(null=True, blank=True)
    request = models.TextField()  # the recorded request payload (as stored in the event: redacted)
    response = models.TextField()  # {fields of the response event, chunks: [stream chunk payloads]}
    response_digest = models.CharField(max_length=64)
    hits = models.IntegerField(default=0)
    last_hit_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["workspace", "key"], name="cached_ws_key"),
            models.Index(fields=["workspace", "key_v1"], name="cached_ws_key_v1"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "key", "response_digest"], name="uniq_cached_response"
            )
        ]


class OtelTrace(models.Model):
    """An OTLP trace that became its own run (no span named one): found again by its trace id when
    later batches of the trace arrive, and read by the quiet-period sweep that ends the run."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="otel_traces")
    trace_id = models.CharField(max_length=32)  # 32 lowercase hex digits
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="otel_traces")
    session_id = ProtocolCharField(max_length=200, blank=True, default="")
    title = ProtocolCharField(max_length=300, blank=True, default="")  # the title given on creation
    root_status = models.CharField(max_length=8, blank=True, default="")  # "", "ok", "error"
    root_ended = models.BooleanField(default=False)
    last_span_at = models.DateTimeField()  # server clock: when a span of the trace last arrived
    ended = models.BooleanField(default=False)  # the sweep ended its run (or found it ended)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "trace_id"], name="uniq_otel_trace_per_workspace")
        ]
        indexes = [models.Index(fields=["ended", "root_ended", "last_span_at"], name="otel_trace_quiet")]


class OtelPendingLog(models.Model):
    """A GenAI content log record (``POST /v1/logs``) whose span has not arrived yet: joined onto
    the span when it does (then deleted), dropped by the sweep when it waited too long."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="otel_pending_logs")
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    record = models.TextField()  # the decoded record as JSON text
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "trace_id", "span_id"], name="otel_pending_span"),
            models.Index(fields=["received_at"], name="otel_pending_age"),
        ]


class SigningKey(models.Model):
    """An Ed25519 key that signs exported bundles (runs.actions.signing): public half and validity.

    The private seed never enters the database: it lives in ``WORKBENCH_SIGNING_KEY_DIR`` (a file
    per kid, 0600) or in the environment (``WORKBENCH_SIGNING_KEY``). Rows are kept after rotation
    and revocation, so ``/.well-known/jwks.json`` keeps listing every key that ever signed.
    ``workspace`` is null for the instance key, set for a workspace's own key.
    """

    kid = models.CharField(max_length=64, unique=True)  # RFC 7638 thumbprint
    x = models.CharField(max_length=64)  # the public key, base64url (RFC 8037)
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="signing_keys"
    )
    source = models.CharField(max_length=8, default="file")  # "file" (key dir) or "env"
    created_at = models.DateTimeField(auto_now_add=True)
    not_before = models.DateTimeField()
    not_after = models.DateTimeField(null=True, blank=True)  # set when a rotation retires it
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["not_before", "id"]

    def __str__(self) -> str:
        return self.kid


from runs.models_budgets import BudgetRecord, RunBudget, WorkflowBudget, WorkspaceBudget  # noqa: E402,F401
from runs.models_gatelinks import EmailLinkSettings, GateDecisionMeta, GateLink  # noqa: E402,F401
from runs.models_gatepolicy import GateEscalation, GatePolicySetting, GateVote  # noqa: E402,F401
from runs.models_imports import ImportJob, ImportJobStatus  # noqa: E402,F401  (beyond this module)
from runs.models_monitors import Monitor, MonitorChange, MonitorMetric, MonitorSample, MonitorState  # noqa: E402,F401
from runs.models_notify import (  # noqa: E402,F401
    BREAKER_CLOSED,
    BREAKER_HALF_OPEN,
    BREAKER_OPEN,
    Delivery,
    DeliveryChannel,
    DeliveryQuerySet,
    DeliveryStatus,
    NotificationPreference,
    Webhook,
    WebhookKind,
)
from runs.models_prompts import (  # noqa: E402,F401
    PromotionRequest,
    PromotionStatus,
    Prompt,
    PromptLabel,
    PromptType,
    PromptVersion,
    ProtectedLabel,
)
from runs.models_rollups import (  # noqa: E402,F401
    CostRollup,
    MetricRollup,
    RunCostRollup,
    RunMetricRollup,
    RunRollup,
)
from runs.models_slack import SlackApp, SlackGateMessage, SlackLink, SlackSeenRequest  # noqa: E402,F401
from runs.models_workers import WorkerLease  # noqa: E402,F401
