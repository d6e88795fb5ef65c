"""``{% job_colocations job as rows %}``: the job page's measured-against-predicted slowdowns."""

from __future__ import annotations

from typing import Any

from django import template

from jobs.colocation import job_colocations as select

register = template.Library()


@register.simple_tag
def job_colocations(job: Any) -> list[dict[str, Any]]:
    return select(job)
