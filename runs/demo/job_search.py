"""Demo data: a job-search pipeline recorded through the in-process session API (the one write path)."""

from __future__ import annotations

from typing import Any

from runs.engine import programs
from runs.execution.host import Workbench
from runs.execution.replay import run_program
from runs.execution.session import RunSession
from runs.models import Run, Workspace
from runs.selectors.runs import find_run, runs_of

DEMO_RUN_ID = "run_demo_jobsearch"
DEMO_FORK_RUN_ID = "run_demo_jobsearch_retry"  # the fork of the rejected run

JOB_SEARCH_WORKFLOW: dict[str, Any] = {
    "id": "job-search",
    "version": 3,
    "title": "Job search: profile, postings, scores, applications",
    "steps": [
        {
            "id": "parse",
            "title": "Parse resume",
            "gatePolicy": "AUTO",
            "inputs": ["resume"],
            "outputs": ["profile"],
        },
        {
            "id": "search",
            "title": "Search postings",
            "gatePolicy": "PAUSE_BEFORE",
            "inputs": ["profile"],
            "outputs": ["postings"],
        },
        {
            "id": "score",
            "title": "Score matches",
            "gatePolicy": "PAUSE_AFTER",
            "inputs": ["postings"],
            "outputs": ["scores"],
        },
        {
            "id": "draft",
            "title": "Draft applications",
            "gatePolicy": "CHECKPOINT",
            "inputs": ["scores"],
            "outputs": ["application"],
        },
    ],
    "edges": [
        {"id": "e1", "from": "parse", "to": "search"},
        {"id": "e2", "from": "search", "to": "score"},
        {"id": "e3", "from": "score", "to": "draft"},
    ],
}

PROFILE = {
    "headline": "Senior Python engineer",
    "skills": ["python", "django", "postgresql", "llm evaluation"],
    "summary": "Builds reliable data platforms and review tooling.",
    "yearsOfExperience": 9,
    "locations": ["Berlin", "Remote"],
    "remoteOnly": False,
}

POSTINGS = [
    {
        "id": "j1",
        "title": "Staff Backend Engineer",
        "company": "Northwind",
        "url": "https://jobs.example/j1",
        "remote": True,
        "salary": {"min": 95000, "max": 120000, "currency": "EUR"},
    },
    {
        "id": "j2",
        "title": "ML Platform Engineer",
        "company": "Contoso",
        "url": "https://jobs.example/j2",
        "location": "Berlin",
    },
    {
        "id": "j3",
        "title": "Python Developer",
        "company": "Fabrikam",
        "url": "https://jobs.example/j3",
        "remote": False,
    },
]

RULES = {
    "id": "job-filters",
    "ruleSchemaId": "rules.job_filter",
    "rules": [
        {
            "id": "r1",
            "priority": 10,
            "enabled": True,
            "label": "Remote friendly",
            "payload": {"kind": "remote", "value": "yes"},
        },
        {
            "id": "r2",
            "priority": 20,
            "enabled": True,
            "label": "Python roles",
            "payload": {"kind": "keyword", "value": "python"},
        },
    ],
}


def _model_call(
    s: RunSession,
    step: str,
    *,
    provider: str,
    model: str,
    summary: str,
    inp: int,
    out: int,
    cost: float,
    cached: int = 0,
    reasoning: int = 0,
    correlation: str,
) -> None:
    s.log_model_io(
        direction="request",
        provider=provider,
        model=model,
        step_id=step,
        correlation_id=correlation,
        summary=f"request: {summary}",
        payload={"messages": [{"role": "user", "content": summary}]},
    )
    s.log_model_io(
        direction="response",
        provider=provider,
        model=model,
        step_id=step,
        correlation_id=correlation,
        usage={
            "inputTokens": inp,
            "outputTokens": out,
            "totalTokens": inp + out,
            "cachedInputTokens": cached,
            "reasoningTokens": reasoning,
        },
        cost={"amount": cost, "currency": "USD"},
        duration_ms=420 + out,
        summary=summary,
    )


def _parse_and_search(s: RunSession, *, approve_search: bool | None) -> None:
    s.change_rule_set(RULES)
    s.begin_step("parse")
    s.start_span("span-parse", "parse resume", kind="internal")
    _model_call(
        s,
        "parse",
        provider="anthropic",
        model="claude-haiku-4-5",
        summary="extract profile from resume",
        inp=1800,
        out=420,
        cost=0.0035,
        cached=1200,
        correlation="c-parse",
    )
    s.write_artifact("profile", "job.profile", PROFILE, step_id="parse", idempotency_key="profile-v1")
    s.patch_artifact(
        "profile",
        1,
        [
            {"op": "replace", "path": "/headline", "value": "Staff Python engineer"},
            {"op": "add", "path": "/skills/-", "value": "htmx"},
        ],
        step_id="parse",
    )
    s.end_span("span-parse", status="ok", duration_ms=900)
    s.complete_step("parse")
    s.request_gate("search", "PAUSE_BEFORE", reason="Confirm the profile before searching")
    if approve_search is None:
        return
    s.resolve_gate(
        "search",
        "PAUSE_BEFORE",
        "approved" if approve_search else "rejected",
        note="Profile looks right" if approve_search else "Wrong seniority: redo the parse",
        actor="user:admin",
    )


def build_demo(workspace: Workspace) -> list[Run]:
    """Creates the demo runs (idempotent: does nothing when the demo run already exists)."""
    if find_run(workspace, DEMO_RUN_ID) is not None:
        return list(runs_of(workspace))
    wb = Workbench(workspace=workspace, actor="pipeline:job-search")
    subject = {"userId": "user-ada", "tenantId": "tenant-acme", "planId": "pro"}

    # 1. The showcase: waits for a reviewer at the PAUSE_AFTER gate of "score", with history behind it.
    main = wb.start_run(
        workflow=JOB_SEARCH_WORKFLOW,
        run_id=DEMO_RUN_ID,
        title="Senior backend roles, Berlin, remote-friendly",
        subject=subject,
        tags=["demo", "job-search"],
        metadata={"source": "demo_data", "resume": "ada.pdf"},
    )
    _parse_and_search(main, approve_search=True)
    main.begin_step("search")
    main.log_tool_call(
        "search_jobs",
        args={"query": "python remote", "limit": 3},
        result={"count": 3},
        step_id="search",
        correlation_id="c-search",
    )
    _model_call(
        main,
        "search",
        provider="openai",
        model="gpt-4.1-mini",
        summary="normalise postings",
        inp=2400,
        out=610,
        cost=0.0021,
        correlation="c-search-llm",
    )
    main.write_artifact("postings", "job.posting", POSTINGS, step_id="search")
    main.complete_step("search")
    main.begin_step("score")
    _model_call(
        main,
        "score",
        provider="anthropic",
        model="claude-sonnet-4-5",
        summary="score postings",
        inp=3100,
        out=900,
        cost=0.0228,
        reasoning=350,
        correlation="c-score",
    )
    main.write_artifact(
        "scores",
        "job.match_scores",
        [
            {"jobId": "j1", "score": 91, "reasons": ["remote", "python"]},
            {"jobId": "j2", "score": 74, "reasons": ["ml platform"]},
            {"jobId": "j3", "score": 55, "reasons": ["junior scope"]},
        ],
        step_id="score",
    )
    main.complete_step("score")
    main.request_gate("score", "PAUSE_AFTER", reason="Check the scores before drafting applications")
    main.annotate("Scores look plausible; j3 may be below level.", tags=["review"])

    # 2. Waiting at the PAUSE_BEFORE gate of "search".
    waiting = wb.start_run(
        workflow=JOB_SEARCH_WORKFLOW,
        title="Data engineering roles, Lisbon, hybrid",
        subject={"userId": "user-bo", "planId": "free"},
        tags=["demo"],
    )
    _parse_and_search(waiting, approve_search=None)

    # 3. Rejected at the search gate: an explicit stop, nothing skipped. (Its "rejected" badge comes
    # from that gate: no "rejected" tag, which its fork would inherit without being rejected.)
    rejected = wb.start_run(
        workflow=JOB_SEARCH_WORKFLOW,
        title="Staff Python roles, Amsterdam, on-site",
        subject={"userId": "user-cy", "planId": "pro"},
        tags=["demo"],
    )
    _parse_and_search(rejected, approve_search=False)

    # 4. Completed end to end, with checkpoints inside "draft": executed by the registered step code,
    # so it can be replayed and branched by the workbench itself.

    done = run_program(
        wb,
        workflow=JOB_SEARCH_WORKFLOW,
        title="ML platform roles, remote within the EU",
        subject=subject,
        tags=["demo", "completed"],
        program=job_search_program,
    )

    # 5. A fork of the rejected run, retrying from where the rejection happened.
    fork = wb.fork(rejected.run_id, new_run_id=DEMO_FORK_RUN_ID)
    fork.annotate("Forked to retry the parse with the senior template.")
    fork.set_title("Staff Python roles, Amsterdam: retry with the senior template")
    return [main.run, waiting.run, rejected.run, done.run, fork.run]


def job_search_program(s) -> None:
    """The job-search pipeline as step code (a ``runs.execution.replay.ProgramSession``): the run the demo
    records end to end, and what a replay or branch of such a run re-executes. The scripted
    reviewer approves; a branch can decide otherwise (``gateDecisions``) and the pipeline then
    stops at that gate. ``configurable.draftModel`` picks the model of the draft step."""
    _parse_and_search(s, approve_search=None)
    if s.gate_decision("search", "PAUSE_BEFORE", "approved", note="Profile looks right") != "approved":
        s.annotate("Search was rejected: the pipeline stops before searching.", tags=["rejected"])
        s.fail("the search gate was rejected")
        return
    s.begin_step("search")
    s.write_artifact("postings", "job.posting", POSTINGS[:1], step_id="search")
    s.complete_step("search")
    s.begin_step("score")
    s.write_artifact(
        "scores", "job.match_scores", [{"jobId": "j1", "score": 88, "reasons": ["remote"]}], step_id="score"
    )
    s.complete_step("score")
    s.request_gate("score", "PAUSE_AFTER")
    if s.gate_decision("score", "PAUSE_AFTER", "approved") != "approved":
        s.annotate("Scores were rejected: no application is drafted.", tags=["rejected"])
        s.fail("the score review was rejected")
        return
    opened = s.begin_step("draft")  # a CHECKPOINT step asks for approval before it starts
    if opened.events and opened.events[0]["type"] == "human_gate_requested":
        s.gate_decision("draft", "CHECKPOINT", "approved")
        s.begin_step("draft")
    for checkpoint in ("outline", "final"):
        s.request_gate("draft", "CHECKPOINT", checkpoint=checkpoint, reason=f"Approve the {checkpoint}")
        s.gate_decision("draft", "CHECKPOINT", "approved", checkpoint=checkpoint)
    _model_call(
        s,
        "draft",
        provider="anthropic",
        model=s.configurable.get("draftModel", "claude-sonnet-4-5"),
        summary="draft cover letter",
        inp=2200,
        out=1400,
        cost=0.0276,
        correlation="c-draft",
    )
    s.write_artifact(
        "application",
        "job.application_draft",
        {"jobId": "j1", "coverLetter": "Dear Northwind team, ...", "status": "ready"},
        step_id="draft",
    )
    s.complete_step("draft")
    # A CHECKPOINT step is reviewed after it completes too: the run completes only once it is.
    if s.gate_decision("draft", "PAUSE_AFTER", "approved") != "approved":
        s.fail("the draft was rejected")
        return
    s.complete()


programs.register(JOB_SEARCH_WORKFLOW["id"], job_search_program)
