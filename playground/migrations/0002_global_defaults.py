"""Global defaults: Anthropic and OpenAI providers reading their keys from the environment, and a
small catalogue with list prices per million tokens (editable in the price table; a price left
empty is shown as unknown)."""

from decimal import Decimal

from django.db import migrations

ANTHROPIC = [
    # model id, name, window, thinking, input, output, cache read, cache write, default
    ("claude-sonnet-4-6", "Claude Sonnet 4.6", 200_000, "3", "15", "0.30", "3.75", True),
    ("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, "1", "5", "0.10", "1.25", False),
    ("claude-opus-4-5", "Claude Opus 4.5", 200_000, "5", "25", "0.50", "6.25", False),
]
OPENAI = [
    ("gpt-5", "GPT-5", 400_000, "1.25", "10", "0.125"),
    ("gpt-5-mini", "GPT-5 mini", 400_000, "0.25", "2", "0.025"),
]


def create(apps, schema_editor):
    Provider = apps.get_model("playground", "ProviderConfig")
    Model = apps.get_model("playground", "ModelEntry")
    anthropic = Provider.objects.create(name="Anthropic", kind="anthropic", api_key_env="ANTHROPIC_API_KEY")
    openai = Provider.objects.create(name="OpenAI", kind="openai", api_key_env="OPENAI_API_KEY")
    for pos, (mid, name, window, inp, out, read, write, default) in enumerate(ANTHROPIC):
        Model.objects.create(
            provider=anthropic, model_id=mid, display_name=name, context_window=window, supports_thinking=True,
            supports_citations=True, supports_pdf=True, is_default=default, position=pos,
            input_price=Decimal(inp), output_price=Decimal(out), cache_read_price=Decimal(read),
            cache_write_price=Decimal(write),
        )
    for pos, (mid, name, window, inp, out, read) in enumerate(OPENAI, start=10):
        Model.objects.create(
            provider=openai, model_id=mid, display_name=name, context_window=window, supports_thinking=True,
            supports_pdf=True, max_tokens_param="max_completion_tokens", position=pos,
            input_price=Decimal(inp), output_price=Decimal(out), cache_read_price=Decimal(read),
        )


def remove(apps, schema_editor):
    apps.get_model("playground", "ProviderConfig").objects.filter(workspace__isnull=True, name__in=["Anthropic", "OpenAI"]).delete()


class Migration(migrations.Migration):
    dependencies = [("playground", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
