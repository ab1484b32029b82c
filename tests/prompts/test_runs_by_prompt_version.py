"""A model call made with a fetched prompt records its name and version (the SDK's traced clients,
after Prompt.compile()); the runs list filters by ``name@version`` and a version lists its runs."""

from __future__ import annotations

from workbench_sdk.prompt_context import active_prompt
from workbench_sdk.prompts import Prompt
from workbench_sdk.traced import Tracer

from runs import actions
from runs.selectors.prompts import cost_by_version, runs_using_version
from runs.selectors.run_list import RunListFilters, runs_page


class Collect:
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.events: list[dict] = []

    def record(self, events: list[dict]) -> None:
        self.events.extend(events)


def _run_with_call(workspace, workflow, run_id: str, prompt: Prompt | None) -> None:
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id=run_id, actor="user:alice")
    sink = Collect(run_id)
    token = active_prompt.set(None)
    try:
        if prompt is not None:
            prompt.compile(name="Ann")
        prices = {"gpt-x": {"input": "2", "output": "8", "currency": "USD"}}
        call = Tracer(sink, prices=prices).begin("openai", "gpt-x", {"model": "gpt-x", "messages": []})
        usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
        call.finish({"id": "r", "model": "gpt-x", "choices": []}, usage=usage)
    finally:
        active_prompt.reset(token)
    actions.do_append_events(workspace=workspace, run_id=run_id, events=sink.events, actor="token:t")


def test_runs_filter_by_prompt_version(workspace, other_workspace, workflow):
    v2 = Prompt(name="support/gréet", version=2, type="text", body="Hi {{name}}")
    v1 = Prompt(name="support/gréet", version=1, type="text", body="Hello {{name}}")
    _run_with_call(workspace, workflow, "run_v2", v2)
    _run_with_call(workspace, workflow, "run_v1", v1)
    _run_with_call(workspace, workflow, "run_none", None)
    _run_with_call(other_workspace, workflow, "run_theirs", v2)

    def ids(text: str) -> list[str]:
        runs, _ = runs_page(workspace, RunListFilters(prompt=text))
        return [r.run_id for r in runs]

    assert ids("support/gréet@2") == ["run_v2"]
    assert ids("support/gréet@1") == ["run_v1"]
    assert ids("support/gréet@3") == [] and ids("nonsense") == []
    assert [r.run_id for r in runs_using_version(workspace, "support/gréet", 2)] == ["run_v2"]

    costs = cost_by_version(workspace, "support/gréet")
    assert [(r["version"], r["calls"], r["tokens"]) for r in costs["rows"]] == [(2, 1, 1500), (1, 1, 1500)]
    assert str(costs["rows"][0]["cost"]["USD"]) == "0.006"  # 1000 x 2 + 500 x 8 per million
    assert cost_by_version(other_workspace, "support/gréet")["rows"][0]["calls"] == 1
