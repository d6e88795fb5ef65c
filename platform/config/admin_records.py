"""The admin base for records that only the platform writes (ledgers, audit events): they can be
read and filtered, never added, changed or deleted by hand, so the history stays whole."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class RecordAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
