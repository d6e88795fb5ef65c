"""Teams and memberships change through accounts.services, from the API or Django admin alike: a team
keeps at least one owner, names are unique, and the admin goes through the same rules."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from accounts.models import Membership, Role, Team
from accounts.services import membership_remove, membership_set, team_create, team_update
from quotas.models import Quota

pytestmark = pytest.mark.django_db


def test_creating_a_team_gives_it_an_owner_and_a_quota(owner) -> None:
    team = team_create(name="Robotics Lab", actor="admin", owner=owner)

    assert team.slug == "robotics-lab"
    assert Membership.objects.get(team=team).role == Role.OWNER
    assert Quota.objects.filter(team=team).exists()


def test_team_names_and_slugs_are_unique(team) -> None:
    with pytest.raises(ValidationError) as error:
        team_create(name="Vision", slug="vision", actor="admin")
    assert set(error.value.message_dict) == {"name", "slug"}


def test_a_bad_slug_is_refused(team) -> None:
    with pytest.raises(ValidationError) as error:
        team_update(team=team, actor="admin", name="Vision", slug="Not A Slug")
    assert "slug" in error.value.message_dict
    team.refresh_from_db()
    assert team.slug == "vision"


def test_the_last_owner_can_be_neither_demoted_nor_removed(team, owner) -> None:
    with pytest.raises(ValidationError):
        membership_set(team=team, user=owner, role=Role.MEMBER, actor="admin")
    with pytest.raises(ValidationError):
        membership_remove(team=team, user=owner, actor="admin")
    assert Membership.objects.get(team=team, user=owner).role == Role.OWNER


def test_an_owner_can_step_down_once_another_owner_exists(team, owner, member) -> None:
    membership_set(team=team, user=member, role=Role.OWNER, actor="admin")
    membership_set(team=team, user=owner, role=Role.VIEWER, actor="admin")

    roles = dict(Membership.objects.filter(team=team).values_list("user__username", "role"))
    assert roles == {"max": "owner", "olivia": "viewer"}


def test_an_unknown_role_is_refused(team, member) -> None:
    with pytest.raises(ValidationError):
        membership_set(team=team, user=member, role="admin", actor="admin")


def test_admin_adds_a_team_and_members_through_the_services(client, team, owner) -> None:
    admin = User.objects.create_superuser("root", password="root-password-1")
    newcomer = User.objects.create_user("nina")
    client.force_login(admin)

    response = client.post(
        "/admin/accounts/team/add/",
        {
            "name": "NLP",
            "slug": "nlp",
            "description": "",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-0-user": str(newcomer.pk),
            "memberships-0-role": "owner",
        },
    )

    assert response.status_code == 302, response.content[:2000]
    nlp = Team.objects.get(slug="nlp")
    assert Quota.objects.filter(team=nlp).exists()  # made by team_create, not by a bare save()
    assert Membership.objects.get(team=nlp).user == newcomer


def test_admin_cannot_remove_the_last_owner(client, team, owner) -> None:
    admin = User.objects.create_superuser("root", password="root-password-1")
    membership = Membership.objects.get(team=team, user=owner)
    client.force_login(admin)

    response = client.post(
        f"/admin/accounts/team/{team.pk}/change/",
        {
            "name": "Vision",
            "slug": "vision",
            "description": "",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": str(membership.pk),
            "memberships-0-team": str(team.pk),
            "memberships-0-user": str(owner.pk),
            "memberships-0-role": "owner",
            "memberships-0-DELETE": "on",
        },
        follow=True,
    )

    assert response.status_code == 200
    assert "at least one owner" in response.content.decode()
    assert Membership.objects.filter(team=team, user=owner, role="owner").exists()


def test_admin_token_creation_shows_the_secret_once_and_stores_its_hash(client, member) -> None:
    from accounts.models import ApiToken, hash_token

    admin = User.objects.create_superuser("root", password="root-password-1")
    client.force_login(admin)

    response = client.post(
        "/admin/accounts/apitoken/add/", {"user": str(member.pk), "name": "ci", "ttl_days": "7"}, follow=True
    )

    assert response.status_code == 200
    token = ApiToken.objects.get(user=member, name="ci")
    shown = [str(m) for m in response.context["messages"]]
    raw = next(part for m in shown for part in m.split() if part.startswith("gpu_"))
    assert token.key_hash == hash_token(raw)


def test_an_owner_manages_members_over_the_api(team, owner, member, api_client_for) -> None:
    User.objects.create_user("nina")
    client = api_client_for(owner)

    added = client.post(f"/api/v1/teams/{team.pk}/members/", {"username": "nina"}, format="json")
    promoted = client.patch(f"/api/v1/teams/{team.pk}/members/{member.pk}/", {"role": "owner"}, format="json")

    assert (added.status_code, added.json()["role"]) == (201, "member")
    assert (promoted.status_code, promoted.json()["role"]) == (200, "owner")
    members = client.get(f"/api/v1/teams/{team.pk}/members/").json()
    assert {(m["username"], m["role"]) for m in members} == {
        ("olivia", "owner"),
        ("max", "owner"),
        ("nina", "member"),
    }


def test_the_api_refuses_to_leave_a_team_without_an_owner(team, owner, api_client_for) -> None:
    response = api_client_for(owner).delete(f"/api/v1/teams/{team.pk}/members/{owner.pk}/")

    assert response.status_code == 400
    assert "at least one owner" in response.json()["extra"]["fields"]["role"][0]
    assert Membership.objects.filter(team=team, user=owner).exists()


def test_adding_an_unknown_user_is_a_400(team, owner, api_client_for) -> None:
    response = api_client_for(owner).post(
        f"/api/v1/teams/{team.pk}/members/", {"username": "ghost", "role": "boss"}, format="json"
    )

    assert response.status_code == 400
    assert set(response.json()["extra"]["fields"]) == {"role"}  # the role is checked before the user
    response = api_client_for(owner).post(
        f"/api/v1/teams/{team.pk}/members/", {"username": "ghost"}, format="json"
    )
    assert response.json()["extra"]["fields"] == {"username": ["No active user with this username."]}
