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


def _jobs_imports() -> dict[str, set[str]]:
    """Module -> the jobs modules it imports, at any depth of the file (a late import counts too)."""
    package = ROOT / "jobs"
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name in modules:
        tree = ast.parse((package / f"{name}.py").read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("jobs."))
            elif isinstance(node, ast.ImportFrom) and node.module == "jobs":
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jobs."):
                found.add(node.module.split(".")[1])
        graph[name] = found & modules - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle in ``graph`` (the modules in order, the first repeated at the end), or []."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = "done"
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_the_cycle_finder_finds_a_loop() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_jobs_modules_import_each_other_in_one_direction() -> None:
    # Services and tasks call down (binding, dispatch, scheduling, sync): nothing calls back up, not
    # even through an import inside a function.
    assert _cycle(_jobs_imports()) == []


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of the file (a late import counts too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_the_engine_imports_no_plugin_and_the_framework_does_not_run_the_engine() -> None:
    # framework <- engine <- plugins, one way: the engine takes what fits from engine.fit, not from a
    # plugin, and the framework (Protocols, registry, profiles) never runs the engine.
    scheduler = ROOT / "scheduler"
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((scheduler / "engine").glob("*.py"))
        for name in sorted(_imported_modules(path))
        if name.startswith("scheduler.plugins")
    ]
    offenders += [
        f"scheduler/framework.py imports {name}"
        for name in sorted(_imported_modules(scheduler / "framework.py"))
        if name.startswith("scheduler.engine")
        and name != "scheduler.engine.arrays.ClusterArrays"
        and name != "scheduler.engine.arrays"
    ]
    assert offenders == []


def test_every_plugin_module_registers_one_plugin() -> None:
    counts = {}
    for path in sorted((ROOT / "scheduler" / "plugins").glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        counts[path.name] = sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            for d in node.decorator_list
            if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "register"
        )
    assert {name: n for name, n in counts.items() if n > 1} == {}


def test_the_library_imports_no_benchmark_harness() -> None:
    # scheduler/bench and the CLI (scheduler/commands) may use the library; the library may not use
    # them.
    allowed = ("bench/", "commands/", "__main__.py")
    offenders = []
    for path in sorted((ROOT / "scheduler").rglob("*.py")):
        rel = path.relative_to(ROOT / "scheduler").as_posix()
        if rel.startswith(allowed):
            continue
        offenders += [
            f"{rel} imports {n}" for n in sorted(_imported_modules(path)) if n.startswith("scheduler.bench")
        ]
    assert offenders == []


def _late_imports(path: Path) -> list[int]:
    """Lines of the import statements of ``path`` that run later than its import (in a function or class)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {id(node) for node in tree.body}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top
    ]


def test_the_framework_and_the_plugin_registry_import_nothing_late() -> None:
    # The registry is full because the package root imports scheduler.plugins, not because
    # create_plugin loads the plugins on its first call.
    scheduler = ROOT / "scheduler"
    paths = [
        scheduler / "framework.py",
        scheduler / "plugin_registry.py",
        scheduler / "plugins" / "__init__.py",
    ]
    assert [f"{path.relative_to(ROOT)}:{line}" for path in paths for line in _late_imports(path)] == []


def test_the_late_import_finder_finds_an_import_in_a_function(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("import os\n\n\ndef f() -> None:\n    import sys\n")
    assert _late_imports(module) == [5]


def test_the_plugin_registry_is_a_leaf_and_the_framework_imports_no_plugin() -> None:
    # framework -> plugin_registry <- plugins -> framework: one way, so neither needs the other to
    # have finished loading.
    scheduler = ROOT / "scheduler"
    offenders = [
        f"plugin_registry.py imports {name}"
        for name in sorted(_imported_modules(scheduler / "plugin_registry.py"))
        if name.startswith("scheduler")
    ]
    offenders += [
        f"framework.py imports {name}"
        for name in sorted(_imported_modules(scheduler / "framework.py"))
        if name.startswith("scheduler.plugins")
    ]
    assert offenders == []


def test_the_plugins_package_imports_every_plugin_module() -> None:
    package = ROOT / "scheduler" / "plugins"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    imported = {
        name.removeprefix("scheduler.plugins.") for name in _imported_modules(package / "__init__.py")
    }
    assert sorted(modules - imported) == []


def test_the_simulator_imports_no_benchmark() -> None:
    # The merge of sharded simulate runs plots what it merges, so it lives in bench/simulate.
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "scheduler" / "sim").rglob("*.py"))
        for name in sorted(_imported_modules(path))
        if name.startswith("scheduler.bench")
    ]
    assert offenders == []
