"""Django admin for teams, memberships and API tokens. Every change goes through accounts.services,
the same functions the REST API uses, so the admin cannot bypass their rules (one owner at least,
hashed tokens shown once)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts import services
from accounts.models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "member_count", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    fields = ["name", "slug", "description", "created_at"]
    readonly_fields = ["created_at"]
    inlines = [MembershipInline]

    @admin.display(description="members")
    def member_count(self, team: Team) -> int:
        return team.memberships.count()

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        if change:
            services.team_update(
                team=obj, actor=request.user, name=obj.name, slug=obj.slug, description=obj.description
            )
        else:
            created = services.team_create(
                name=obj.name, slug=obj.slug, description=obj.description, actor=request.user
            )
            obj.pk = created.pk
            obj.created_at = created.created_at

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not Membership:
            super().save_formset(request, form, formset, change)
            return
        team = form.instance
        instances = formset.save(commit=False)
        try:
            # Additions and role changes first, so promoting a new owner before removing the old one works.
            for membership in instances:
                services.membership_set(
                    team=team, user=membership.user, role=membership.role, actor=request.user
                )
            for membership in formset.deleted_objects:
                services.membership_remove(team=team, user=membership.user, actor=request.user)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Who is in which team with which role, filterable; changes go through accounts.services (a team
    keeps at least one owner)."""

    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__name", "team__slug"]
    autocomplete_fields = ["user", "team"]
    readonly_fields = ["created_at"]
    ordering = ["team__name", "user__username"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Moving a membership to another user or team is a removal and an addition.
        return [*self.readonly_fields, "user", "team"] if obj is not None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        try:
            saved = services.membership_set(team=obj.team, user=obj.user, role=obj.role, actor=request.user)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
            return
        obj.pk = saved.pk
        obj.created_at = saved.created_at

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        try:
            services.membership_remove(team=obj.team, user=obj.user, actor=request.user)
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset.select_related("team", "user"):
            self.delete_model(request, membership)


class TokenAddForm(forms.ModelForm):
    ttl_days = forms.IntegerField(
        required=False, min_value=0, help_text="Days until it expires; empty = the default; 0 = never."
    )

    class Meta:
        model = ApiToken
        fields = ["user", "name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name", "prefix"]
    actions = ["revoke"]
    autocomplete_fields = ["user"]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = TokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["user", "name", "ttl_days"]
        return ["user", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            return  # tokens are immutable; revoke and create a new one instead
        token, raw = services.token_create(
            user=obj.user, name=obj.name, ttl_days=form.cleaned_data.get("ttl_days")
        )
        for field in ("pk", "key_hash", "prefix", "created_at", "expires_at"):
            setattr(obj, field, getattr(token, field))
        messages.warning(request, f"Token for {obj.user}: {raw} — copy it now, it is not shown again.")

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(services.token_revoke(token=token, actor=request.user) for token in queryset)
        messages.success(request, f"Revoked {revoked} token(s).")
