"""Decisions from outside the pages: e-mailed decision links and the channel of each decision.

:class:`GateLink` is one gate e-mail's Approve/Reject link pair. The link carries a random token;
the row keeps only its SHA-256 (a leaked database does not leak working links). The row binds the
token to its recipient and its gate, says when it expires, and is marked used by the decision made
through it (single use is this row, updated under a lock in the transaction that decides).

:class:`GateDecisionMeta` records, beside a ``human_gate_resolved`` event (as the event's actor is
recorded beside it, never inside its protocol JSON), metadata such as ``{"workbench.channel":
"email"}``: the page, the API, an e-mailed link, Slack, an MCP client.

:class:`EmailLinkSettings` is a workspace's choice that every e-mailed link needs a signed-in
session (the link then leads through the sign-in page).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.fields import ProtocolCharField


class GateLink(models.Model):
    token_hash = models.CharField(max_length=64, unique=True)
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    step_id = ProtocolCharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = ProtocolCharField(max_length=200, blank=True, default="")
    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The e-mail it was made for: a retried delivery replaces its token instead of adding one.
    delivery = models.OneToOneField(
        "runs.Delivery", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=16, blank=True, default="")  # what was decided through it

    class Meta:
        app_label = "runs"
        indexes = [models.Index(fields=["expires_at"], name="gatelink_expires")]

    def __str__(self) -> str:
        return f"link to {self.step_id}/{self.gate} of run {self.run_id} for user {self.recipient_id}"


class GateDecisionMeta(models.Model):
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    event_id = ProtocolCharField(max_length=200)
    metadata = models.JSONField(default=dict)
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "runs"
        constraints = [models.UniqueConstraint(fields=["run", "event_id"], name="gatemeta_run_event")]

    def __str__(self) -> str:
        return f"{self.event_id}: {self.metadata}"


class EmailLinkSettings(models.Model):
    workspace = models.OneToOneField("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    require_sign_in = models.BooleanField(default=False)

    class Meta:
        app_label = "runs"

    def __str__(self) -> str:
        return f"e-mail links of workspace {self.workspace_id}: sign-in {self.require_sign_in}"
