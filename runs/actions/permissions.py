"""Who may do what: the one table of rights, asked by pages, REST, websockets and MCP alike.

A caller holds *scopes*: an API token has the scopes it was issued with; a person has the scopes of
their role in the workspace (``ROLE_SCOPES``). Every operation is an :class:`Action`, and
``ACTION_SCOPES`` says which scopes allow it (any one of them). No adapter decides on its own:

    from runs.actions.permissions import Action, allows, role_allows
    principal.require_action(Action.CANCEL_RUN)          # REST / MCP (accounts.principals)
    require_action(request, Action.CANCEL_RUN)           # pages (runs.web.request): 404 outsider, 403 role
    role_allows(subscription.role, Action.VIEW_RUN)      # websockets

Decisions recorded here (where the pages and the API used to disagree, the API's stricter rule
won): cancelling, deleting, starting, forking and importing runs, and appending events, change
what a run *is* and need ``write`` (owners, write tokens); reviewing (gates, artifacts, rules,
annotations) needs ``review`` or ``write``; reading needs ``read``. Managing the workspace's
settings that machines may manage too (webhooks and their deliveries) needs ``manage``: owners
hold it, and a token can be issued with it. Managing members (inviting, revoking invitations,
changing roles, removing), tokens and model providers is for owners signed in as themselves: no
token scope grants it (``administer`` is a scope only the owner role carries).

Prompts: saving a version and moving a label need ``write`` or ``review`` (owners and testers,
never viewers); a protected label moves only when a promotion request is approved, which needs
``review``; which labels are protected is a workspace setting (``manage``, owners).
"""

from __future__ import annotations

from enum import StrEnum

READ = "read"
WRITE = "write"
REVIEW = "review"
# Owners' powers over workspace settings (webhooks); owners hold it and tokens may be issued with it.
MANAGE = "manage"
# Only the owner role holds it; tokens cannot be issued with it (accounts.models.Scope omits it).
ADMINISTER = "administer"


class Role(StrEnum):
    # Mirrors runs.models.Role (kept free of Django so the table can be read and tested alone).
    OWNER = "owner"
    REVIEWER = "reviewer"
    VIEWER = "viewer"


ROLE_SCOPES: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({READ}),
    Role.REVIEWER: frozenset({READ, REVIEW}),
    Role.OWNER: frozenset({READ, WRITE, REVIEW, MANAGE, ADMINISTER}),
}


class Action(StrEnum):
    VIEW_RUN = "view_run"  # runs, events, state, bundles, transcripts, ledgers, live pages
    VERIFY_BUNDLE = "verify_bundle"  # check a bundle without storing anything
    START_RUN = "start_run"
    APPEND_EVENTS = "append_events"  # a host's events, or a whole run state (PUT)
    FORK_RUN = "fork_run"
    CANCEL_RUN = "cancel_run"
    DELETE_RUN = "delete_run"
    IMPORT_BUNDLE = "import_bundle"
    RESOLVE_GATE = "resolve_gate"
    EDIT_ARTIFACT = "edit_artifact"
    EDIT_RULES = "edit_rules"
    ANNOTATE = "annotate"
    PLAYGROUND_SEND = "playground_send"
    MANAGE_MEMBERS = "manage_members"  # see members, change their roles, remove them
    INVITE_MEMBER = "invite_member"  # an invitation the invitee accepts (nobody is added without consent)
    REVOKE_INVITATION = "revoke_invitation"
    MANAGE_TOKENS = "manage_tokens"
    MANAGE_PROVIDERS = "manage_providers"
    MANAGE_WEBHOOKS = "manage_webhooks"  # webhooks, their secrets, deliveries, test events, retries
    VIEW_DATASET = "view_dataset"  # datasets, their items at any revision, experiments (evals)
    EDIT_DATASET = "edit_dataset"  # create datasets, add and delete items (curating is reviewing)
    RUN_EXPERIMENT = "run_experiment"  # fork every item's run (spends like a fork), rescore
    VIEW_PROMPTS = "view_prompts"  # prompts, versions, labels, promotion requests; fetch by label
    SAVE_PROMPT = "save_prompt"  # a new version (testers in the playground, write tokens)
    MOVE_LABEL = "move_label"  # an unprotected label moves; a protected one: ask for a promotion
    DECIDE_PROMOTION = "decide_promotion"  # approve or reject a promotion request (a gate)
    PROTECT_LABEL = "protect_label"  # which labels of the workspace are protected
    REVIEW_QUEUE_ITEMS = "review_queue_items"  # claim, score and skip annotation queue items
    MANAGE_QUEUES = "manage_queues"  # create and delete annotation queues, add their items
    MANAGE_GATE_POLICIES = "manage_gate_policies"  # quorum, separation of duties, assignment, escalation
    MANAGE_JUDGES = "manage_judges"  # attach gate judges, their budgets and delegation policies


ACTION_SCOPES: dict[Action, frozenset[str]] = {
    Action.VIEW_RUN: frozenset({READ}),
    Action.VERIFY_BUNDLE: frozenset({READ}),
    Action.START_RUN: frozenset({WRITE}),
    Action.APPEND_EVENTS: frozenset({WRITE}),
    Action.FORK_RUN: frozenset({WRITE}),
    Action.CANCEL_RUN: frozenset({WRITE}),
    Action.DELETE_RUN: frozenset({WRITE}),
    Action.IMPORT_BUNDLE: frozenset({WRITE}),
    Action.RESOLVE_GATE: frozenset({REVIEW}),
    Action.EDIT_ARTIFACT: frozenset({WRITE, REVIEW}),
    Action.EDIT_RULES: frozenset({WRITE, REVIEW}),
    Action.ANNOTATE: frozenset({WRITE, REVIEW}),
    Action.PLAYGROUND_SEND: frozenset({REVIEW}),
    Action.MANAGE_MEMBERS: frozenset({ADMINISTER}),
    Action.INVITE_MEMBER: frozenset({ADMINISTER}),
    Action.REVOKE_INVITATION: frozenset({ADMINISTER}),
    Action.MANAGE_TOKENS: frozenset({ADMINISTER}),
    Action.MANAGE_PROVIDERS: frozenset({ADMINISTER}),
    Action.MANAGE_WEBHOOKS: frozenset({MANAGE}),
    Action.VIEW_DATASET: frozenset({READ}),
    Action.EDIT_DATASET: frozenset({WRITE, REVIEW}),
    Action.RUN_EXPERIMENT: frozenset({WRITE}),
    Action.VIEW_PROMPTS: frozenset({READ}),
    Action.SAVE_PROMPT: frozenset({WRITE, REVIEW}),
    Action.MOVE_LABEL: frozenset({WRITE, REVIEW}),
    Action.DECIDE_PROMOTION: frozenset({REVIEW}),
    Action.PROTECT_LABEL: frozenset({MANAGE}),
    # reviewers review queue items but cannot edit queues; owners (and write or manage tokens:
    # pipelines that add items) manage them; viewers do neither
    Action.REVIEW_QUEUE_ITEMS: frozenset({REVIEW}),
    Action.MANAGE_QUEUES: frozenset({WRITE, MANAGE}),
    Action.MANAGE_GATE_POLICIES: frozenset({MANAGE}),
    # who may let a machine decide a gate: owners (and manage tokens), never reviewers
    Action.MANAGE_JUDGES: frozenset({MANAGE}),
}

assert set(ACTION_SCOPES) == set(Action), "every action needs a row"


def allows(scopes: frozenset[str] | set[str], action: Action | str) -> bool:
    """True when any of ``scopes`` permits ``action``."""
    return not ACTION_SCOPES[Action(action)].isdisjoint(scopes)


def role_allows(role: str | None, action: Action | str) -> bool:
    if role is None or role not in ROLE_SCOPES:
        return False
    return allows(ROLE_SCOPES[role], action)


def needed_scopes(action: Action | str) -> tuple[str, ...]:
    return tuple(sorted(ACTION_SCOPES[Action(action)]))


def minimum_role(action: Action | str) -> str | None:
    """The least role that may do ``action`` (for messages and for hiding controls)."""
    for role in (Role.VIEWER, Role.REVIEWER, Role.OWNER):
        if role_allows(role, action):
            return role
    return None
