"""``manage.py loadtest`` refuses settings that cannot describe a load, with one line saying why."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clients": 0}, "--clients must be >= 1"),
        ({"duration": 0}, "--duration > 0"),
        ({"think_time": -0.5}, "--think-time must be >= 0"),
        ({"url": "http://127.0.0.1:9"}, "--url needs --token"),
    ],
)
def test_loadtest_rejects_settings_that_describe_no_load(
    options: dict[str, object], message: str, tmp_path
) -> None:
    out = tmp_path / "load.json"
    with pytest.raises(CommandError, match=message):
        call_command("loadtest", out=str(out), **options)
    assert not out.exists()  # nothing is written for a refused run
