from django.contrib import admin

from workspaces.models import WorkspaceLimit


@admin.register(WorkspaceLimit)
class WorkspaceLimitAdmin(admin.ModelAdmin):
    list_display = ["team", "max_workspaces", "max_gpu_milli"]
    search_fields = ["team__slug", "team__name"]
