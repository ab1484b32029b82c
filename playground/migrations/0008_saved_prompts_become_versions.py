"""Each saved prompt becomes version 1 of a prompt (runs.Prompt) of the same workspace.

A saved prompt with a system prompt becomes a chat prompt (system, then user message); one without
becomes a text prompt. The model, operation type and the saved toggles become the version's config.
Names that are not prompt names (runs.actions.prompts.NAME) are tidied, and kept apart when two
tidy to the same name. The saved prompts themselves stay (the playground still opens them).
"""

import re

import orjson
from django.db import migrations

NAME = re.compile(r"[\w][\w .-]{0,99}(?:/[\w][\w .-]{0,99})*")


def _name(raw: str, taken: set) -> str:
    text = (raw or "").strip()
    if not NAME.fullmatch(text) or text.endswith(" "):
        parts = [re.sub(r"[^\w .-]+", "-", part).strip(" .-") for part in text.split("/")]
        text = "/".join(p[:100] for p in parts if p) or "prompt"
    text = text[:190]
    base, n = text, 2
    while text in taken:
        text = f"{base}-{n}"
        n += 1
    taken.add(text)
    return text


def forward(apps, schema_editor):
    SavedPrompt = apps.get_model("playground", "SavedPrompt")
    Prompt = apps.get_model("runs", "Prompt")
    PromptVersion = apps.get_model("runs", "PromptVersion")
    PromptLabel = apps.get_model("runs", "PromptLabel")
    taken: dict = {}
    for saved in SavedPrompt.objects.select_related("model", "model__provider").order_by("pk"):
        names = taken.setdefault(
            saved.workspace_id, set(Prompt.objects.filter(workspace_id=saved.workspace_id).values_list("name", flat=True))
        )
        if saved.system_prompt:
            kind = "chat"
            body = [{"role": "system", "content": saved.system_prompt}, {"role": "user", "content": saved.prompt}]
        else:
            kind, body = "text", saved.prompt
        config = {"operation_type": saved.operation_type, "params": saved.options or {}}
        if saved.model is not None:
            config.update(
                {"model": saved.model.model_id, "provider": saved.model.provider.kind, "model_entry": saved.model.pk}
            )
        prompt = Prompt.objects.create(
            workspace_id=saved.workspace_id, name=_name(saved.name, names), type=kind, created_by_id=saved.created_by_id
        )
        version = PromptVersion.objects.create(
            prompt=prompt,
            number=1,
            body=orjson.dumps(body).decode(),
            config=orjson.dumps(config).decode(),
            message="from the saved prompt",
            created_by_id=saved.created_by_id,
        )
        PromptLabel.objects.create(prompt=prompt, name="latest", version=version, updated_by_id=saved.created_by_id)


class Migration(migrations.Migration):
    dependencies = [
        ("playground", "0007_execution_incomplete"),
        ("runs", "0014_prompts"),
    ]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
