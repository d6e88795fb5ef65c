"""The portal's form for a new API token: a name and how long it lives."""

from __future__ import annotations

from django import forms
from django.conf import settings

# Offered lifetimes in days. "Never" only where the operator made never-expiring tokens the default
# (API_TOKEN_TTL_DAYS=0): a user should not get a permanent key the operator did not choose.
LIFETIMES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]


def lifetime_choices() -> list[tuple[int, str]]:
    default = int(settings.API_TOKEN_TTL_DAYS)
    choices = list(LIFETIMES)
    if default <= 0:
        choices.append((0, "Never"))
    elif default not in dict(choices):
        choices.append((default, f"{default} days"))
    return sorted(choices, key=lambda c: c[0] if c[0] > 0 else 10**9)


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What the token is for, e.g. “laptop” or “CI”.", strip=True
    )
    expires_in_days = forms.TypedChoiceField(coerce=int, label="Expires after")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["expires_in_days"]
        field.choices = lifetime_choices()  # type: ignore[attr-defined]
        field.initial = int(settings.API_TOKEN_TTL_DAYS)
