"""Input and output shapes of the accounts API. Declarative only: rules live in accounts.services."""

from __future__ import annotations

from rest_framework import serializers

from config.api import StrictInputMixin


class TokenObtainInput(StrictInputMixin, serializers.Serializer):
    # min_length puts minLength: 1 in the schema, which a blank value already fails (allow_blank).
    username = serializers.CharField(min_length=1, max_length=150)
    password = serializers.CharField(
        min_length=1, max_length=256, style={"input_type": "password"}, trim_whitespace=False
    )
    name = serializers.CharField(
        max_length=100, required=False, default="default", help_text="A label for you."
    )


class TokenOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="First characters of the token, to recognise it.")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    is_active = serializers.BooleanField()


class TokenCreatedOutput(TokenOutput):
    token = serializers.CharField(help_text="The secret. Shown this once; only its hash is stored.")


class TeamOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    description = serializers.CharField()
    role = serializers.CharField(help_text="Your role in this team: owner, member or viewer.")
    member_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class MemberOutput(serializers.Serializer):
    user_id = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="user.username")
    full_name = serializers.CharField(source="user.get_full_name")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField(source="created_at")


class MemberAddInput(StrictInputMixin, serializers.Serializer):
    username = serializers.CharField(min_length=1, max_length=150)
    role = serializers.ChoiceField(choices=["owner", "member", "viewer"], default="member")


class MemberRoleInput(StrictInputMixin, serializers.Serializer):
    role = serializers.ChoiceField(choices=["owner", "member", "viewer"])
