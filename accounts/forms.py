from __future__ import annotations

from datetime import timedelta

from django import forms

from accounts.models import Scope

EXPIRY_CHOICES = [("", "Never"), ("7", "7 days"), ("30", "30 days"), ("90", "90 days"), ("365", "1 year")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="What uses it, e.g. “nightly pipeline”.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.READ]
    )
    expires_in_days = forms.ChoiceField(choices=EXPIRY_CHOICES, required=False, label="Expires")

    def expires_in(self) -> timedelta | None:
        days = self.cleaned_data.get("expires_in_days")
        return timedelta(days=int(days)) if days else None
