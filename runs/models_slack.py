"""Interactive Slack gates: the Slack app behind a Slack hook, the people linked to Slack users,
the gate messages posted (to update them in place and thread what follows), the interaction
requests already seen (a replay is refused), and the channel each gate decision came from.

A Slack hook (``Webhook.kind == "slack"``) with a :class:`SlackApp` row posts through Slack's Web
API with the app's bot token (``chat.postMessage``) instead of an incoming-webhook URL; its
``url`` holds the Web API's base URL it was made with (``WORKBENCH_SLACK_API_URL``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SlackApp(models.Model):
    webhook = models.OneToOneField("runs.Webhook", on_delete=models.CASCADE, related_name="slack_app")
    channel_id = models.CharField(max_length=80)  # where gate messages go (C..., or a channel name)
    bot_token = models.CharField(max_length=300)  # xoxb-...: never answered back
    signing_secret = models.CharField(max_length=200)  # verifies the app's interaction requests
    # The owner allows a Slack user whose Slack e-mail (users.info) is a member's e-mail to act as
    # that member without linking first.
    email_match = models.BooleanField(default=False)

    class Meta:
        app_label = "runs"

    def __str__(self) -> str:
        return f"Slack app of {self.webhook_id} -> {self.channel_id}"


class SlackLink(models.Model):
    """A Slack user (of one Slack team) acting as a member of one workspace."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links")
    team_id = models.CharField(max_length=40)
    slack_user_id = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "runs"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "team_id", "slack_user_id"], name="uniq_slack_link_user"
            )
        ]


class SlackGateMessage(models.Model):
    """A gate message one Slack app posted: updated in place after the decision, its thread told
    when the run completes or fails."""

    webhook = models.ForeignKey("runs.Webhook", on_delete=models.CASCADE, related_name="+")
    run_id = models.CharField(max_length=200)
    step_id = models.CharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = models.CharField(max_length=200, blank=True, default="")
    channel_id = models.CharField(max_length=80)
    ts = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "runs"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["webhook", "run_id"], name="slack_msg_run")]


class SlackSeenRequest(models.Model):
    """An interaction request (its signature) or a link token already used: seen once only."""

    digest = models.CharField(max_length=64, unique=True)
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "runs"
