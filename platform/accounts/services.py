"""Writes to accounts: API tokens, teams and memberships. Keyword-only, typed, atomic, audited.

Django admin and the REST API both call these, so the rules (hashed tokens, one owner at least, no
duplicate memberships) hold whichever door a change comes through.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from accounts.models import ApiToken, Membership, Role, Team, hash_token

audit = logging.getLogger("audit")

# Recognisable in logs and secret scanners; the random part carries 256 bits.
TOKEN_MARKER = "gpu_"


def _token_ttl(ttl_days: int | None) -> timedelta | None:
    days = settings.API_TOKEN_TTL_DAYS if ttl_days is None else ttl_days
    # 0 (or less) means "never expires": an explicit operator choice, documented in the README.
    return timedelta(days=days) if days > 0 else None


@transaction.atomic
def token_create(*, user: Any, name: str = "default", ttl_days: int | None = None) -> tuple[ApiToken, str]:
    """Create a token for ``user``. Returns the row and the raw key, which is never stored or shown again.

    The key expires after ``ttl_days`` (default ``settings.API_TOKEN_TTL_DAYS``; 0 = never).
    """
    name = (name or "default").strip()
    if len(name) > 100:
        raise ValidationError({"name": ["Ensure this field has no more than 100 characters."]})
    raw = TOKEN_MARKER + secrets.token_urlsafe(32)
    ttl = _token_ttl(ttl_days)
    token = ApiToken.objects.create(
        user=user,
        name=name or "default",
        key_hash=hash_token(raw),
        prefix=raw[:8],
        expires_at=timezone.now() + ttl if ttl else None,
    )
    audit.info("token created: id=%s user=%s name=%s", token.pk, user.username, token.name)
    return token, raw


def token_obtain(*, username: str, password: str, name: str = "default") -> tuple[ApiToken, str]:
    """Trade a username and password for a new token, or raise ValidationError (one message for all
    failures, so the answer does not reveal which usernames exist)."""
    user = authenticate(username=username, password=password)
    if user is None or not user.is_active:
        raise ValidationError({"non_field_errors": ["Unable to log in with the provided credentials."]})
    return token_create(user=user, name=name)


@transaction.atomic
def token_revoke(*, token: ApiToken, actor: Any) -> bool:
    """Revoke ``token``. Only its owner or a superuser may. Idempotent: False if it was already revoked."""
    if token.user_id != actor.pk and not actor.is_superuser:
        raise PermissionDenied("You can only revoke your own tokens.")
    updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db(fields=["revoked_at"])
    if updated:
        audit.info("token revoked: id=%s user_id=%s by=%s", token.pk, token.user_id, actor.username)
    return bool(updated)


def _validate_team_fields(*, name: str, slug: str, exclude_pk: int | None) -> None:
    errors: dict[str, list[str]] = {}
    if not name.strip():
        errors["name"] = ["This field may not be blank."]
    elif len(name) > 100:
        errors["name"] = ["Ensure this field has no more than 100 characters."]
    elif Team.objects.filter(name=name).exclude(pk=exclude_pk).exists():
        errors["name"] = [f"A team named {name!r} already exists."]
    if not slug or slugify(slug) != slug or len(slug) > 100:
        errors["slug"] = ["Use lowercase letters, digits and hyphens (at most 100)."]
    elif Team.objects.filter(slug=slug).exclude(pk=exclude_pk).exists():
        errors["slug"] = [f"A team with slug {slug!r} already exists."]
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def team_create(*, name: str, actor: Any, slug: str = "", description: str = "", owner: Any = None) -> Team:
    """Create a team (and its default quota row). ``owner``, when given, becomes its first owner."""
    from quotas.services import quota_ensure  # quotas depends on accounts, not the other way round

    slug = slug or slugify(name)
    _validate_team_fields(name=name, slug=slug, exclude_pk=None)
    team = Team.objects.create(name=name.strip(), slug=slug, description=description)
    quota_ensure(team=team)
    if owner is not None:
        Membership.objects.create(team=team, user=owner, role=Role.OWNER)
    audit.info("team created: %s by %s", team.slug, getattr(actor, "username", actor))
    return team


@transaction.atomic
def team_update(*, team: Team, actor: Any, name: str, slug: str, description: str = "") -> Team:
    _validate_team_fields(name=name, slug=slug, exclude_pk=team.pk)
    Team.objects.filter(pk=team.pk).update(name=name.strip(), slug=slug, description=description)
    team.refresh_from_db()
    audit.info("team updated: %s by %s", team.slug, getattr(actor, "username", actor))
    return team


def _owners_left(team: Team, *, without_user_id: int) -> int:
    return Membership.objects.filter(team=team, role=Role.OWNER).exclude(user_id=without_user_id).count()


@transaction.atomic
def membership_set(*, team: Team, user: Any, role: str, actor: Any) -> Membership:
    """Add ``user`` to ``team`` with ``role``, or change their role. A team keeps at least one owner
    once it has had one (demoting the last owner is refused)."""
    if role not in Role.values:
        raise ValidationError({"role": [f"Choose one of {', '.join(Role.values)}."]})
    # Lock the team row: two admins demoting the two last owners at once must not leave none.
    Team.objects.select_for_update().get(pk=team.pk)
    membership = Membership.objects.filter(team=team, user=user).first()
    demotes_owner = membership is not None and membership.role == Role.OWNER and role != Role.OWNER
    if demotes_owner and _owners_left(team, without_user_id=user.pk) == 0:
        raise ValidationError({"role": ["A team needs at least one owner; add another owner first."]})
    if membership is None:
        membership = Membership.objects.create(team=team, user=user, role=role)
    elif membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    audit.info(
        "membership set: %s in %s as %s by %s",
        user.username,
        team.slug,
        role,
        getattr(actor, "username", actor),
    )
    return membership


@transaction.atomic
def membership_remove(*, team: Team, user: Any, actor: Any) -> bool:
    """Remove ``user`` from ``team``. Refuses to remove the last owner. False if not a member."""
    Team.objects.select_for_update().get(pk=team.pk)
    membership = Membership.objects.filter(team=team, user=user).first()
    if membership is None:
        return False
    if membership.role == Role.OWNER and _owners_left(team, without_user_id=user.pk) == 0:
        raise ValidationError({"role": ["A team needs at least one owner; add another owner first."]})
    membership.delete()
    audit.info(
        "membership removed: %s from %s by %s", user.username, team.slug, getattr(actor, "username", actor)
    )
    return True
