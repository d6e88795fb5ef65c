"""The layout of DESIGN.md §2 stays honest."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Modules of the scheduler allowed to reach outside the pure library.
SCHEDULER_ADAPTERS = ("backends/kubernetes", "agent")


def test_platform_is_a_source_root_not_a_package() -> None:
    assert not (ROOT / "platform" / "__init__.py").exists(), (
        "platform/__init__.py would shadow stdlib 'platform'"
    )


def test_no_top_level_package_shadows_the_standard_library() -> None:
    roots = [ROOT, ROOT / "platform"]
    shadowing = []
    for root in roots:
        for child in root.iterdir():
            name = child.stem if child.suffix == ".py" else child.name
            is_module = child.suffix == ".py" or (child / "__init__.py").exists()
            if is_module and name in sys.stdlib_module_names:
                shadowing.append(str(child.relative_to(ROOT)))
    assert shadowing == []


def test_scheduler_core_imports_no_django() -> None:
    offenders = []
    for path in (ROOT / "scheduler").rglob("*.py"):
        rel = path.relative_to(ROOT / "scheduler").as_posix()
        if rel.startswith(SCHEDULER_ADAPTERS):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] in {"django", "rest_framework", "celery"} for n in names):
                offenders.append(rel)
    assert offenders == []
