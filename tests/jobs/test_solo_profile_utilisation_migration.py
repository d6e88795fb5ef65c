"""Migration 0006: solo profiles' utilisations become nullable, and the simulated backend's old 0 % /
0 % placeholders become "not measured"; reversible. Runs on whichever database the suite uses
(PostgreSQL with ``DATABASE_URL``, else SQLite)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("jobs", "0005_workspaces")]
AFTER = [("jobs", "0006_soloprofile_utilisation_not_measured")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate the test database to ``targets``; the historical apps at that state."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def at_0005(transactional_db: Any) -> Any:
    apps = migrate(BEFORE)
    yield apps
    # Leave the database at the latest migrations for the tests that follow.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def row(apps: Any, command: str, gpu_util: float | None, mem_util: float | None) -> None:
    apps.get_model("jobs", "SoloProfile").objects.create(
        image="pytorch:2.4",
        command_hash=command.ljust(64, "0"),
        command=command,
        gpu_model="V100",
        gpu_util=gpu_util,
        mem_util=mem_util,
        gpu_memory_mib=2000.0,
        samples=3,
    )


def utilisations(apps: Any) -> dict[str, tuple[float | None, float | None]]:
    model = apps.get_model("jobs", "SoloProfile")
    return {r.command: (r.gpu_util, r.mem_util) for r in model.objects.all()}


def test_the_migration_empties_placeholder_zeros_and_keeps_measured_values(at_0005: Any) -> None:
    row(at_0005, "simulated", 0.0, 0.0)
    row(at_0005, "measured", 37.0, 12.0)
    row(at_0005, "idle-sm-only", 0.0, 5.0)  # one zero is a reading, not the placeholder pair

    after = migrate(AFTER)

    assert utilisations(after) == {
        "simulated": (None, None),
        "measured": (37.0, 12.0),
        "idle-sm-only": (0.0, 5.0),
    }
    # The columns now accept "not measured".
    row(after, "new-simulated", None, None)
    assert utilisations(after)["new-simulated"] == (None, None)


def test_reversing_the_migration_writes_zeros_back_where_nothing_was_measured(at_0005: Any) -> None:
    after = migrate(AFTER)
    row(after, "simulated", None, None)
    row(after, "measured", 37.0, 12.0)

    before = migrate(BEFORE)

    assert utilisations(before) == {"simulated": (0.0, 0.0), "measured": (37.0, 12.0)}
