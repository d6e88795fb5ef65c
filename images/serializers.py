"""Output shape of the read-only image catalog."""

from __future__ import annotations

from rest_framework import serializers

from images.models import JobImage


class ImageOutput(serializers.ModelSerializer):
    reference = serializers.CharField(read_only=True, help_text="What to pass as a job's image.")
    # Declared, not derived from the model: "" (not declared) must be in the schema's enum.
    accelerator = serializers.ChoiceField(
        choices=JobImage._meta.get_field("accelerator").choices,
        allow_blank=True,
        read_only=True,
        help_text="gpu or cpu; empty: not declared.",
    )

    class Meta:
        model = JobImage
        fields = [
            "id",
            "name",
            "tag",
            "reference",
            "framework",
            "framework_version",
            "cuda_version",
            "min_driver",
            "python_version",
            "description",
            "registry",
            "digest",
            "accelerator",
            "base_image",
            "built_at",
            "is_active",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields
