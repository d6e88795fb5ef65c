"""A JupyterLab the local backend's job user can run (docs/workspaces.md, "Where they run").

As root, ``make run`` starts jobs as ``LOCAL_JOB_USER``. The platform's own Python often lives in
root's private home (pyenv under /root), so that user cannot run the platform's ``jupyter``. Once,
``runplatform`` builds a virtual environment from a Python every user can run, with JupyterLab at the
versions of requirements.lock, readable by all; its ``bin`` is then put first on the PATH of
workspace tasks through ``LOCAL_WORKSPACE_PATH`` (scheduler.backends.local.environment).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from scheduler.backends.local.environment import WORKSPACE_PATH

PATH_VARIABLE = WORKSPACE_PATH  # what runplatform sets for the backend
# Newest first: JupyterLab 4 needs Python 3.9 or later.
SYSTEM_FOLDERS: tuple[str, ...] = ("/usr/local/bin", "/usr/bin", "/bin")
PYTHON_CANDIDATES: tuple[str, ...] = (
    "python3.13", "python3.12", "python3.11", "python3.10", "python3.9", "python3",
)  # fmt: skip
# Pinned to requirements.lock's versions. Only these: the whole lock as constraints does not resolve
# in a fresh environment (pip reports a conflict through nbconvert's dependencies).
PACKAGES: tuple[str, ...] = ("jupyterlab", "ipykernel", "jupyter_server")


def reachable_by_others(path: Path) -> bool:
    """Whether any user may read ``path`` (the real file) and traverse every folder above it."""
    try:
        real = path.resolve(strict=True)
        if not real.stat().st_mode & stat.S_IROTH:
            return False
        return all(p.stat().st_mode & stat.S_IXOTH for p in real.parents)
    except OSError:
        return False


def shared_python(
    candidates: Iterable[str] = PYTHON_CANDIDATES, search_path: str | None = None
) -> Path | None:
    """The first candidate, in any folder of ``search_path`` (PATH, then the system's folders),
    whose real file every user can read and run. Each folder is asked on its own: the first
    ``python3.11`` on PATH is often pyenv's shim under /root, hiding /usr/bin's."""
    path = os.environ.get("PATH", "") if search_path is None else search_path
    folders = [f for f in path.split(os.pathsep) if f]
    if search_path is None:
        folders += [f for f in SYSTEM_FOLDERS if f not in folders]
    for name in candidates:
        for folder in folders:
            found = shutil.which(name, path=folder)
            if found and reachable_by_others(Path(found)):
                return Path(found)
    return None


def open_to_others(root: Path) -> None:
    """Add read (and, for folders and programs, traverse/run) for everyone under ``root``."""
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            extra = stat.S_IROTH | stat.S_IRGRP
            if path.is_dir() or mode & stat.S_IXUSR:
                extra |= stat.S_IXOTH | stat.S_IXGRP
            path.chmod(stat.S_IMODE(mode) | extra)
    root.chmod(0o755)


def locked_requirements(lock: Path, names: Iterable[str] = PACKAGES) -> list[str]:
    """``name==version`` for each of ``names`` pinned in ``lock`` (just ``name`` when not pinned)."""
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            pins[name.strip().lower().replace("-", "_")] = version.strip()
    out = []
    for name in names:
        pinned = pins.get(name.lower().replace("-", "_"))
        out.append(f"{name}=={pinned}" if pinned else name)
    return out


def ensure_workspace_python(target: Path, lock: Path) -> Path:
    """``target``'s ``bin`` folder, building the environment first when it has no ``jupyter``.
    Raises RuntimeError with one line when no shared Python exists or the install fails."""
    bin_dir = target / "bin"
    if (bin_dir / "jupyter").is_file() and reachable_by_others(bin_dir / "python"):
        return bin_dir
    python = shared_python()
    if python is None:
        raise RuntimeError(f"no Python every user can run (tried {', '.join(PYTHON_CANDIDATES)})")
    steps = [
        [str(python), "-m", "venv", "--clear", str(target)],
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", *locked_requirements(lock)],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"{' '.join(step[:3])}: {lines[-1] if lines else done.returncode}")
    open_to_others(target)
    target.parent.chmod(target.parent.stat().st_mode | stat.S_IXOTH)
    return bin_dir
