from django.contrib import admin

from playground.models import Execution, ModelEntry, ProviderConfig, SavedPrompt


@admin.register(ProviderConfig)
class ProviderConfigAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "workspace", "base_url", "api_key_hint", "api_key_env", "is_enabled")
    exclude = ("api_key_encrypted",)  # keys are set through the playground settings page, never shown


@admin.register(ModelEntry)
class ModelEntryAdmin(admin.ModelAdmin):
    list_display = (
        "display_name",
        "model_id",
        "provider",
        "workspace",
        "input_price",
        "output_price",
        "cache_read_price",
        "cache_write_price",
        "cache_write_1h_price",
    )


admin.site.register(SavedPrompt)


@admin.register(Execution)
class ExecutionAdmin(admin.ModelAdmin):
    list_display = ("id", "workspace", "model_name", "status", "error_code", "created_at")
    list_filter = ("status",)
